#!/usr/bin/env python3
"""Stale references in vaed's comments and docs.

A comment or a document that names a file which does not exist (moved,
renamed, never written) misleads the next reader, and so does one that cites
the issue tracker (the word "issue" and a number), which no reader of the
code has: the comment should state the rule or the reason itself. This check reads

  * the comments of the C/C++, protobuf, CMake, shell and Python sources
    under daemon/ client/ shm/ ops/ tests/ fuzz/ scripts/ cmake/ and the
    top-level CMakeLists.txt (Python docstrings count as comments; string
    literals in code do not), and
  * the Markdown docs: README.md, docs/**/*.md and the READMEs of those
    directories (their links too),

and reports, one line each, `file:line: names X, which does not exist` (a
file, or one of vaed's CamelCase functions or types, see check_functions) and
`file:line: cites the issue tracker (...)`. Exit status: 0 when
clean, 1 when anything was reported, 2 on a usage error.

What counts as a reference to a file:
  * a path with a slash whose last part has a file extension, or that ends
    in a slash, and whose directory part is a directory of the tree (the
    whole of it, e.g. daemon/engine/rank_stream.h, or its tail, e.g.
    engine/rank_stream.h or vaed/status.h); it exists when it is found
    relative to the repository root, to the directory of the file that
    names it or one of that directory's parents, or as the tail of some
    path in the tree. A path under ../shared is checked against the
    directory beside the repository (skipped when that is absent), and so
    is a name found nowhere in the tree (DESIGN.md, spec/h3_vae.md);
  * a bare file name with one of vaed's source extensions (.h .cc .cmake
    .py .sh .proto .md .toml), outside quotes and Markdown code blocks,
    which must be the name of some file in the tree or beside it.
Not references: URLs, absolute paths, generated paths (a build folder,
$OUT, protoc's .pb.h), globs and placeholders (*.so, <prefix>/lib,
issueNNN_test.cc), headers in <...>, paths into other projects (their
directories are not the tree's: FL2VA/video_vae/klvae.py, torch/...), and
bare names of other projects' files (THIRD_PARTY below).

The tree is what git tracks or would track (ignored build outputs are not
in it); outside a git checkout, every file but build folders.

Run from anywhere: scripts/check-references.py [--root DIR]; ctest runs it
as repo.references, and its own test as repo.references_self_test
(--self-test).
"""

import argparse
import ast
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize

SOURCE_DIRS = ("daemon", "client", "shm", "ops", "tests", "fuzz", "scripts", "cmake")
TOP_FILES = ("CMakeLists.txt",)
DOC_FILES = ("README.md",)
DOC_DIRS = ("docs",)

C_LIKE = (".h", ".hpp", ".cc", ".cpp", ".c", ".cu", ".cuh", ".proto")
HASH_COMMENTS = (".cmake", ".sh", ".bash")
PYTHON = (".py", ".pyi")

# Extensions a bare file name must have to be checked (vaed's own kinds).
BARE_EXTENSIONS = (".h", ".cc", ".cmake", ".py", ".sh", ".proto", ".md", ".toml")
# Extensions that make a slashed word a path.
PATH_EXTENSIONS = BARE_EXTENSIONS + (
    ".c", ".cpp", ".hpp", ".cu", ".txt", ".json", ".service", ".conf", ".in",
    ".pyi", ".cfg", ".yml", ".yaml", ".safetensors", ".pc", ".map", ".bin",
)

# Directories that are not part of the source tree (build outputs, caches).
SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache",
             ".pytest_cache", ".cache"}
# First path components that name generated or machine-local places.
GENERATED = re.compile(r"^(build[^/]*|_build|out|\$\w+|\$\{[^}]*\}|dist|\.venv|venv|"
                       r"site-packages|\.\.?)$")

# Names of other projects' files that vaed's comments cite: LibTorch, CUDA,
# NCCL, Python, Debian, leveldb, Triton and friends. A name here is never
# reported, so none of vaed's own file names belongs here.
THIRD_PARTY = {
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "nccl.h", "zmq.hpp", "zmq.h",
    "torch.h", "Python.h", "pybind11.h", "numpy.h", "dlpack.h", "toml.hpp", "CLI11.hpp",
    "setup.cfg", "pyproject.toml",
    "db.h", "env.h", "mutexlock.h", "env_posix.cc", "db_impl.h",
    "memory.h", "cuda_utils.h", "shared_memory_manager.h", "unistd.h", "stdio.h",
    "stdlib.h", "errno.h", "fcntl.h", "pthread.h", "dlfcn.h", "ATen.h", "Config.h",
    "CUDACachingAllocator.h", "CUDAStream.h", "CUDAGuard.h", "ProcessGroupNCCL.hpp",
    "ProcessGroupGloo.hpp", "Store.hpp", "TCPStore.hpp", "FileStore.hpp",
    "METHOD.md", "CHANGELOG.md", "LICENSE.md", "CONTRIBUTING.md",
    # The upstream H3 reference code (FL2VA) and diffusers.
    "klvae.py", "base_module.py", "vae_processor.py", "minimax_h3_audio_vae.py",
    "dac_audio_vae.py", "dac_bigvgan.py", "dac_activations.py",
    "dac_alias_free_resample.py", "dac_alias_free_filter.py",
    # MKL, libstdc++, the CUDA toolkit, LibTorch's and CMake's own files.
    "mkl_service.h", "mkl_vml_functions.h", "mkl_vml_defines.h", "char_traits.h",
    "driver_types.h", "TorchConfig.cmake", "CTestTestfile.cmake",
}
GENERATED_NAME = re.compile(r"\.pb\.(h|cc)$|_pb2\.pyi?$|\.egg-info$")

PATH_RE = re.compile(r"(?<![\w./\-<>$@])((?:\.\./|\./)?[A-Za-z0-9_\-.]+(?:/[A-Za-z0-9_\-.]+)+/?)")
BARE_RE = re.compile(r"(?<![\w./\-<>$@#*])([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*(?:"
                     + "|".join(re.escape(e) for e in BARE_EXTENSIONS) + r"))(?![\w/\-*]|\.\w)")
QUOTED_RE = re.compile(r'"[^"]*"')
LINK_RE = re.compile(r"\]\(([^()\s#]+)(?:#[^()\s]*)?\)")  # a Markdown link's target
URL_RE = re.compile(r"\b[a-z][a-z0-9+.\-]*://\S+|\bwww\.\S+|\b[\w.\-]+@[\w.\-]+")
ANGLE_RE = re.compile(r"<[^<>\s]*>")
IDENT_RE = re.compile(r"[A-Za-z_]\w*")
FUNCTION_RE = re.compile(r"(?<![\w.])((?:[A-Z]\w*::)*[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)\(\)")
QUALIFIED_RE = re.compile(r"(?<![\w:])[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*(?:::[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*)+")
PLACEHOLDER_IDENT = re.compile(r"[a-z](X|N)$")
# Other projects' CamelCase names that comments cite with ::.
THIRD_PARTY_IDENTIFIERS = {"StatType"}
ISSUE_RE = re.compile(r"\bissues?[ \-]?#?\s?(\d+)\b|\bissue-\d+", re.IGNORECASE)
ISSUE_EXTERNAL = re.compile(r"#\d")  # "project issue #3" names another project's tracker


class Tree:
    """The files and directories of the repository, relative to its root."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        self.paths = set()      # files and directories, relative to the root
        self.dirs = set()       # the directories alone
        self.names = set()      # base names of files and directories
        files = self._git_files()
        if files is None:  # not a git checkout: every file but build outputs
            files = []
            for dirpath, dirnames, filenames in os.walk(self.root):
                rel_dir = os.path.relpath(dirpath, self.root)
                dirnames[:] = [d for d in dirnames if not self._skipped(rel_dir, d)]
                files.extend(os.path.normpath(os.path.join(rel_dir, f)) for f in filenames)
        for rel in files:
            self.paths.add(rel)
            self.names.add(os.path.basename(rel))
            parent = os.path.dirname(rel)
            while parent and parent not in self.dirs:
                self.dirs.add(parent)
                self.paths.add(parent)
                self.names.add(os.path.basename(parent))
                parent = os.path.dirname(parent)
        # What sits beside the repository (../shared: DESIGN.md, spec/, golden/).
        self.shared = os.path.join(os.path.dirname(self.root), "shared")
        self.shared_names = set()
        self.shared_paths = set()
        self.shared_dirs = set()
        if os.path.isdir(self.shared):
            for dirpath, dirnames, filenames in os.walk(self.shared):
                rel_dir = os.path.relpath(dirpath, self.shared)
                for name in dirnames + filenames:
                    rel = os.path.normpath(os.path.join(rel_dir, name))
                    self.shared_names.add(name)
                    self.shared_paths.add(rel)
                    if name in dirnames:
                        self.shared_dirs.add(rel)

    def is_tree_dir(self, rel_dir):
        """Whether `rel_dir` is a directory of the tree, whole or as a tail."""
        if rel_dir in self.dirs or rel_dir in self.shared_dirs:
            return True
        if rel_dir.startswith("shared/") and rel_dir[len("shared/"):] in self.shared_dirs:
            return True
        tail = "/" + rel_dir
        return any(d.endswith(tail) for d in self.dirs)

    def has_name(self, name):
        if name in self.names or name in self.shared_names:
            return True
        # Without ../shared a document named bare (DESIGN.md) cannot be checked.
        return not os.path.isdir(self.shared) and name.endswith(".md")

    def _git_files(self):
        """The checkout's files that git tracks or would track (not ignored
        build outputs), or None when the root is not a git work tree."""
        if not os.path.exists(os.path.join(self.root, ".git")):
            return None
        try:
            out = subprocess.run(
                ["git", "-C", self.root, "ls-files", "-z", "--cached", "--others",
                 "--exclude-standard"], capture_output=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            return None
        names = [n for n in out.decode("utf-8", "replace").split("\0") if n]
        return [n for n in names if os.path.isfile(os.path.join(self.root, n))]

    @staticmethod
    def _skipped(rel_dir, name):
        if name in SKIP_DIRS or name.endswith(".egg-info"):
            return True
        return rel_dir == "." and (name.startswith("build") or name.startswith("."))

    def top_level(self):
        return {p for p in self.paths if "/" not in p}

    def exists(self, ref, source):
        """Whether `ref`, named in the file `source` (relative), is a path in the tree."""
        ref = ref.rstrip("/")
        if ref == "../shared" or ref.startswith("../shared/"):
            if not os.path.isdir(self.shared):
                return True  # cannot be checked here
            return os.path.exists(os.path.join(self.shared, ref[len("../shared"):].lstrip("/")))
        if ref.startswith("./"):
            ref = ref[2:]
        if ref.startswith("shared/") and ref[len("shared/"):] in self.shared_paths:
            return True
        # Relative to the root, the naming file's directory and its parents.
        d = os.path.dirname(source)
        while True:
            cand = os.path.normpath(os.path.join(d, ref))
            if cand in self.paths:
                return True
            if not d:
                break
            d = os.path.dirname(d)
        if ref.startswith("../"):
            return False
        # The tail of a path in the tree (include paths, paths relative to a
        # component: vaed/status.h, engine/rank_stream.h).
        tail = "/" + ref
        if any(p.endswith(tail) for p in self.paths):
            return True
        # Beside the repository (spec/h3_vae.md is ../shared/spec/h3_vae.md).
        return any(p == ref or p.endswith(tail) for p in self.shared_paths)


def comment_lines(path, text):
    """Yields (line number, comment text) for the comments of one file."""
    base = os.path.basename(path)
    ext = os.path.splitext(base)[1]
    if ext in C_LIKE:
        yield from c_comments(text)
    elif ext in PYTHON:
        yield from python_comments(text)
    elif ext in HASH_COMMENTS or base == "CMakeLists.txt" or is_shell_script(text):
        yield from hash_comments(text, cmake=(ext == ".cmake" or base == "CMakeLists.txt"))
    elif ext == ".md":
        yield from markdown_lines(text)


def is_shell_script(text):
    return text.startswith("#!") and ("sh" in text.split("\n", 1)[0])


def c_comments(text, code=None):
    """// and /* */ comments, skipping string and character literals. The
    rest (code and literals) is appended to the list `code` when given."""
    i, n, line = 0, len(text), 1
    start = 0  # where the current stretch of code began
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i) or text.startswith("/*", i):
            if code is not None:
                code.append(text[start:i])
            if text[i + 1] == "/":
                j = text.find("\n", i)
                end = n if j < 0 else j
                parts = [text[i + 2:end]]
            else:
                j = text.find("*/", i + 2)
                end = n if j < 0 else j + 2
                parts = text[i + 2:j if j >= 0 else n].split("\n")
            for k, part in enumerate(parts):
                yield line + k, part
            line += text.count("\n", i, end)
            i = start = end
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            line += text.count("\n", i, end)
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    if code is not None:
        code.append(text[start:])


def hash_comments(text, cmake):
    """# comments of shell and CMake, outside quotes."""
    for number, raw in enumerate(text.split("\n"), 1):
        quote = None
        i = 0
        while i < len(raw):
            c = raw[i]
            if quote:
                if c == "\\":
                    i += 2
                    continue
                if c == quote:
                    quote = None
            elif c in "\"'" and not (cmake and c == "'"):
                quote = c
            elif c == "#" and (i == 0 or raw[i - 1] in " \t;(") and not raw.startswith("#!", i):
                yield number, raw[i + 1:]
                break
            i += 1


def python_comments(text):
    """# comments and docstrings (string statements) of a Python file."""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                yield tok.start[0], tok.string[1:]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            first = node.lineno
            for k, part in enumerate(text.split("\n")[first - 1:node.end_lineno]):
                yield first + k, part


def markdown_lines(text):
    """Every line; a fenced code block's lines are marked by a leading NUL so
    that bare names there (a user's own program) are not checked."""
    fenced = False
    for number, raw in enumerate(text.split("\n"), 1):
        if raw.lstrip().startswith("```"):
            fenced = not fenced
            continue
        yield number, ("\0" + raw) if fenced else raw


def words_to_check(comment):
    """The comment with URLs and <placeholders> blanked out."""
    comment = URL_RE.sub(" ", comment)
    return ANGLE_RE.sub(" ", comment)


def is_placeholder(ref):
    return (any(ch in ref for ch in "*?{}[]$~%") or "..." in ref or "NNN" in ref
            or re.search(r"(^|/)(X+|N+|NAME|FILE|DIR|PATH)(\.|/|$)", ref) is not None)


def check_line(tree, top, source, number, comment, report):
    in_code_block = comment.startswith("\0")
    text = words_to_check(comment)
    for m in ISSUE_RE.finditer(comment):
        if ISSUE_EXTERNAL.search(m.group(0)):
            continue
        report(source, number, f'cites the issue tracker ("{m.group(0)}"); state the rule '
                                f"or the reason itself")
    checked = set()
    if source.endswith(".md"):
        for m in LINK_RE.finditer(comment):
            target = m.group(1)
            if ":" in target or target.startswith("/") or is_placeholder(target):
                continue
            full = os.path.normpath(os.path.join(tree.root, os.path.dirname(source), target))
            beside = os.path.relpath(full, os.path.dirname(tree.root))
            if beside.split(os.sep)[0] == "shared" and not os.path.isdir(tree.shared):
                continue
            checked.add(os.path.basename(target))
            if not os.path.exists(full):
                report(source, number, f"links to {target}, which does not exist")
    for m in PATH_RE.finditer(text):
        if text[m.end():m.end() + 1] in ("*", "?", "{", "[", "<", "$"):
            continue  # the head of a glob or a placeholder
        ref = m.group(1).rstrip(".,;:)")
        parts = [p for p in ref.split("/") if p]
        if not parts or is_placeholder(ref) or GENERATED_NAME.search(parts[-1]):
            continue
        shared = ref == "../shared/" or ref.startswith("../shared/")
        if not shared and any(GENERATED.match(p) for p in parts if p != ".."):
            continue
        if not shared and parts[0] == "..":
            continue  # outside the repository, not beside it
        last = parts[-1]
        checked.add(last)
        has_ext = "." in last and os.path.splitext(last)[1] in PATH_EXTENSIONS
        if not shared:
            if not (has_ext or ref.endswith("/")):
                continue
            dir_parts = parts if ref.endswith("/") else parts[:-1]
            if dir_parts and not (dir_parts[0] in top or tree.is_tree_dir("/".join(dir_parts))):
                continue  # another project's path
            if not dir_parts and not ref.endswith("/"):
                continue
        if not tree.exists(ref, source):
            report(source, number, f"names {ref}, which does not exist")
    if in_code_block:
        return
    for m in BARE_RE.finditer(QUOTED_RE.sub(" ", text)):
        name = m.group(1)
        if name in checked or name in THIRD_PARTY or is_placeholder(name):
            continue
        if name.startswith(".") or name.startswith("-") or GENERATED_NAME.search(name):
            continue
        if not tree.has_name(name):
            report(source, number, f"names {name}, which does not exist")


def python_identifiers(text):
    names = set()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.NAME:
                names.add(tok.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return names


def check_functions(identifiers, source, number, comment, report):
    """vaed's own functions and types as comments name them (CamelCase:
    `Executor::Submit`, `ResetPeakTensorBytes()`) must be identifiers of the
    code. Lower-case names (the C, CUDA, LibTorch and Python APIs) are not
    checked, nor a placeholder like MakeX()."""
    named = {m.group(1): m.group(1) + "()" for m in FUNCTION_RE.finditer(comment)}
    for m in QUALIFIED_RE.finditer(comment):
        named.setdefault(m.group(0), m.group(0))
    for name, shown in named.items():
        parts = name.split("::")
        if any(p in THIRD_PARTY_IDENTIFIERS or PLACEHOLDER_IDENT.search(p) for p in parts):
            continue
        if not all(p in identifiers for p in parts):
            report(source, number, f"names {shown}, which does not exist")


def files_to_scan(tree):
    for rel in sorted(tree.paths):
        first = rel.split("/", 1)[0]
        full = os.path.join(tree.root, rel)
        if not os.path.isfile(full):
            continue
        base = os.path.basename(rel)
        ext = os.path.splitext(base)[1]
        if first in DOC_DIRS and ext == ".md":
            yield rel
        elif rel in DOC_FILES or rel in TOP_FILES:
            yield rel
        elif first in SOURCE_DIRS and (ext in C_LIKE + HASH_COMMENTS + PYTHON + (".md",)
                                       or base == "CMakeLists.txt"
                                       or (ext == "" and is_shell_file(full))):
            yield rel


def is_shell_file(full):
    try:
        with open(full, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.startswith(b"#!") and b"sh" in head.split(b"\n", 1)[0]


def run(root, out=sys.stdout):
    tree = Tree(root)
    top = tree.top_level()
    findings = []

    def report(source, number, what):
        findings.append(f"{source}:{number}: {what}")

    # First every file's comments and the identifiers of its code, then the
    # checks (a comment may name a function defined in a later file).
    comments = []
    identifiers = set()
    for rel in files_to_scan(tree):
        try:
            with open(os.path.join(tree.root, rel), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        ext = os.path.splitext(rel)[1]
        if ext in C_LIKE:
            code = []
            comments.extend((rel, number, c) for number, c in c_comments(text, code))
            identifiers.update(IDENT_RE.findall("".join(code)))
            continue
        if ext in PYTHON:
            identifiers.update(python_identifiers(text))
        comments.extend((rel, number, c) for number, c in comment_lines(rel, text))
    for rel, number, comment in comments:
        check_line(tree, top, rel, number, comment, report)
        check_functions(identifiers, rel, number, comment, report)
    for line in findings:
        print(line, file=out)
    return findings


SELF_TEST_FILES = {
    "daemon/engine/good.h": "// Uses daemon/engine/other.h and engine/other.h, beside other.h.\n"
                            "// See docs/guide.md and vaed/api.h (an include path).\n"
                            "// Built by cmake/thing.cmake; data in ../shared/spec/x.md.\n"
                            "// https://example.com/daemon/gone.h and <prefix>/lib/libx.so\n"
                            "// build/daemon/gone.h, daemon/*.h, <torch/torch.h>, issueNNN_test.cc\n"
                            "// DESIGN.md and spec/x.md lie beside the repository; the upstream\n"
                            "// FL2VA/video_vae/klvae.py and torch/csrc/api.h are other projects'.\n"
                            "// Globs: tests/*_test.cc, scripts/gpu/check_*.sh; quoted: \"t.toml: bad\".\n"
                            "const char* kPath = \"daemon/engine/gone_in_code.h\";  // code, not comment\n"
                            "const char* kRaw = R\"(// daemon/raw_string.h)\";\n",
    "daemon/engine/other.h": "/* Names daemon/engine/stale.h, which was renamed. */\n"
                             "// Thing::Run() and Thing::Size stay; cudaMemcpy(), MakeX() are not ours.\n"
                             "// Thing::EstimatedWaitMs() was deleted.\n"
                             "struct Thing { void Run(); int Size(); };\n",
    "daemon/engine/old.cc": "// The rule (issue 12 §3) lives in gone_too.cc.\n"
                            "// ComfyUI-Foo issue #3 is another project's tracker.\n",
    "shm/include/vaed/api.h": "// Nothing stale here.\n",
    "cmake/thing.cmake": "# Includes cmake/missing.cmake.\nset(X \"#notacomment daemon/x.h\")\n",
    "scripts/tool.py": "\"\"\"Reads docs/guide.md and docs/absent.md.\"\"\"\n"
                       "X = 'scripts/in_a_string.py'  # see scripts/tool.py\n",
    "docs/guide.md": "See [the engine](../daemon/engine/good.h) and `daemon/server/gone.h`.\n"
                     "[Spec](../../shared/spec/x.md#s2), [here](#top), [gone](gone.md), [web](https://x.org/a.md)\n"
                     "```sh\ng++ -o w my_worker.cc && scripts/gone.sh\n```\n",
    "tests/check.sh": "#!/bin/bash\necho \"#x daemon/a.h\"  # runs scripts/tool.py, not scripts/old.py\n",
    "README.md": "Start with docs/guide.md.\n",
}
SELF_TEST_SHARED = {"spec/x.md": "x\n", "DESIGN.md": "x\n"}
SELF_TEST_EXPECTED = {
    "daemon/engine/other.h:1: names daemon/engine/stale.h, which does not exist",
    "daemon/engine/other.h:3: names Thing::EstimatedWaitMs(), which does not exist",
    "daemon/engine/old.cc:1: cites the issue tracker (\"issue 12\"); state the rule or the reason itself",
    "daemon/engine/old.cc:1: names gone_too.cc, which does not exist",
    "cmake/thing.cmake:1: names cmake/missing.cmake, which does not exist",
    "scripts/tool.py:1: names docs/absent.md, which does not exist",
    "docs/guide.md:1: names daemon/server/gone.h, which does not exist",
    "docs/guide.md:2: links to gone.md, which does not exist",
    "docs/guide.md:4: names scripts/gone.sh, which does not exist",
    "tests/check.sh:2: names scripts/old.py, which does not exist",
}


def self_test():
    """Runs the check on a small tree with known good and stale references."""
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "repo")
        for files, base in ((SELF_TEST_FILES, root), (SELF_TEST_SHARED, os.path.join(tmp, "shared"))):
            for rel, text in files.items():
                full = os.path.join(base, rel)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w", encoding="utf-8") as f:
                    f.write(text)
        got = set(run(root, out=io.StringIO()))
    missing = SELF_TEST_EXPECTED - got
    extra = got - SELF_TEST_EXPECTED
    for line in sorted(missing):
        print(f"self-test: not reported: {line}")
    for line in sorted(extra):
        print(f"self-test: reported wrongly: {line}")
    if missing or extra:
        return 1
    print(f"self-test: ok ({len(SELF_TEST_EXPECTED)} stale references found, no false ones)")
    return 0


def main(argv):
    parser = argparse.ArgumentParser(
        description="Report comments and docs that name a file which does not exist, or "
                    "that cite the issue tracker. Exit 1 when anything is reported.")
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="the repository root (default: this script's checkout)")
    parser.add_argument("--self-test", action="store_true",
                        help="check the checker on a temporary tree with known references")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test()
    if not os.path.isdir(args.root):
        parser.error(f"--root {args.root} is not a directory")
    return 1 if run(args.root) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
