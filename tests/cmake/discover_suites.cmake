# Script mode (cmake -P), run after a gtest binary is built: writes a ctest
# include file with one test per GoogleTest suite of the binary, so that a
# suite's tests share one process (and its SetUpTestSuite fixture, e.g. one
# daemon start-up) instead of one process per test.
#
#   -D BIN=<gtest binary> -D OUT=<ctest file> -D TIMEOUT=<s per suite>
#   -D LABELS=<;-list> -D WORKDIR=<dir> -D RUNNER=<run_suite.sh> [-D SERIAL=ON]
#
# Test names are "<binary>.<suite>" (unique across binaries). Each runs
# through run_suite.sh: a suite whose tests all skipped (../shared absent)
# is reported Skipped, a suite with a failing test Failed.
execute_process(COMMAND "${BIN}" --gtest_list_tests
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc
                TIMEOUT 120)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${BIN} --gtest_list_tests failed (${rc}): ${errors}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  # Suite lines are unindented and end with '.' (a typed or parameterized
  # suite may carry a comment after it).
  if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    list(APPEND suites "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES suites)
get_filename_component(bin_name "${BIN}" NAME)
set(content "# Generated from ${bin_name} --gtest_list_tests; do not edit.\n")
foreach(suite IN LISTS suites)
  set(props "TIMEOUT ${TIMEOUT} WORKING_DIRECTORY \"${WORKDIR}\"")
  string(APPEND props " SKIP_RETURN_CODE 77")
  if(LABELS)
    string(APPEND props " LABELS \"${LABELS}\"")
  endif()
  if(SERIAL)
    string(APPEND props " RUN_SERIAL TRUE")
  endif()
  string(APPEND content
         "add_test(\"${bin_name}.${suite}\" \"${RUNNER}\" \"${BIN}\" \"--gtest_filter=${suite}.*\")\n"
         "set_tests_properties(\"${bin_name}.${suite}\" PROPERTIES ${props})\n")
endforeach()
file(WRITE "${OUT}" "${content}")
