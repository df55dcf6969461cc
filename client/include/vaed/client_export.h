// VAED_CLIENT_API: marks the C++ classes libvaed_client.so exports.
//
// The client library's own code is compiled with hidden visibility
// (-fvisibility=hidden), so of it only what carries this macro (the C++
// API: Client, SharedRegion, CudaBuffer) or VAED_C_API (the C ABI,
// vaed/vaed_c.h) can be exported. The linker version script
// client/src/libvaed_client.map then keeps the dynamic symbol table to
// exactly the public API: those and the functions of vaed/status.h and
// vaed/tensor_ref.h. The replies (vaed/replies.h) are plain structs; the
// protocol code inside the library is not exported.
// tests/client/check_exported_symbols.sh fails when anything else is
// exported or a C ABI function is missing.
#ifndef VAED_CLIENT_EXPORT_H_
#define VAED_CLIENT_EXPORT_H_

#if defined(__GNUC__)
#define VAED_CLIENT_API __attribute__((visibility("default")))
#else
#define VAED_CLIENT_API
#endif

#endif  // VAED_CLIENT_EXPORT_H_
