#!/usr/bin/env python3
"""Prints the test programs labelled ``gpu`` in the tests' CMake files, one a line.

Usage: list_gpu_tests.py SOURCE_DIR

Reads every tests/**/CMakeLists.txt under SOURCE_DIR and prints the target
name of each ``vaed_add_test(NAME ... LABELS ... gpu ...)`` call, so that
scripts/gpu/check.sh builds exactly the programs ``ctest -L gpu`` runs
(ctest lists a test program's suites only once it is built). Calls inside
``if(VAED_WITH_CUDA)`` are listed too; the caller keeps the names its build
defines. Comments are ignored; the call may span lines. Standard library
only.
"""

import os
import re
import sys

CALL = re.compile(r"\bvaed_add_test\s*\(")
# Words that end the LABELS list of vaed_add_test (its other keywords).
KEYWORDS = {"SOURCES", "LIBS", "LABELS", "TIMEOUT", "SERIAL", "TORCH"}


def strip_comments(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def calls(text):
    """The argument words of each vaed_add_test( ... ) call."""
    for match in CALL.finditer(text):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield text[match.end():i - 1].split()


def gpu_targets(words):
    if not words:
        return False
    labels, in_labels = [], False
    for w in words[1:]:
        if w in KEYWORDS:
            in_labels = w == "LABELS"
        elif in_labels:
            labels.extend(w.split(";"))
    return "gpu" in labels


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    found = []
    for folder, _, files in sorted(os.walk(os.path.join(argv[1], "tests"))):
        if "CMakeLists.txt" in files:
            with open(os.path.join(folder, "CMakeLists.txt")) as f:
                text = strip_comments(f.read())
            found += [w[0] for w in calls(text) if gpu_targets(w)]
    print("\n".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
