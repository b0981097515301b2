#!/usr/bin/env bash
# CTest "tests:names": Catch2 test names that CTest can run. catch_discover_tests splits a
# name at ';' (a CMake list separator), and the halves then match no test and "pass" without
# running anything. Usage: test_names_check.sh TESTS_DIR
bad=$(grep -rnE 'TEST_CASE\("[^"]*;' "$1" --include='*.cpp')
[[ -z $bad ]] || { echo "FAIL: test names with ';' never run under CTest:"; echo "$bad"; exit 1; }
echo "PASS: no test name contains ';'"
