# How wanlab compiles fast (docs/performance.md, "Build"; bench/sections/build.sh measures it).
#
# Where a cold build's time went before (measured at e44ebfc): most units include toml++ (through
# core/config.h), nlohmann/json and fmt, cli/'s 16 include CLI11; but GCC's -ftime-report puts
# ~80% of the slowest units in optimisation and code generation, not parsing: at -O2 -g every
# unit emits its own copy of each inline function it uses, json's and CLI11's above all. So:
#  - unity batches of 8 files for every library and the unit tests: each batch emits those
#    copies once (files whose file-local names clash compile alone, marked where listed);
#  - one precompiled header of the shared third-party set (wanlab_pch below), compiled once and
#    reused by every library and program; cli/ adds CLI11 in its own, the test programs Catch2;
#  - lld as the linker where it is installed (the test programs are large, with debug info).
# WANLAB_UNITY=OFF compiles each file on its own (scripts/test's sanitizer and fuzzer trees do);
# WANLAB_PCH=OFF parses every header in every file.

# Debug information: line tables by default (GCC -g1, clang -gline-tables-only), enough for
# backtraces, perf, ASan and gdb's `bt` with file:line, at about half the compile time of full
# -g with GCC (a unity batch of cli/: 40.8 s at -g, 22.4 s at -g1, 20.0 s at -g0) and 80% of
# it with clang. WANLAB_DEBUG_INFO=full keeps the build type's own -g (variables and types for
# a debugger).
set(WANLAB_DEBUG_INFO lines CACHE STRING "Debug information in Debug and RelWithDebInfo builds: lines or full")
set_property(CACHE WANLAB_DEBUG_INFO PROPERTY STRINGS lines full)
if(WANLAB_DEBUG_INFO STREQUAL "lines")
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options($<$<CONFIG:Debug,RelWithDebInfo>:-gline-tables-only>)
  else()
    add_compile_options($<$<CONFIG:Debug,RelWithDebInfo>:-g1>)
  endif()
elseif(NOT WANLAB_DEBUG_INFO STREQUAL "full")
  message(FATAL_ERROR "WANLAB_DEBUG_INFO is '${WANLAB_DEBUG_INFO}': use lines or full")
endif()

option(WANLAB_PCH "Precompile the heavy third-party headers (toml++, nlohmann/json, fmt, CLI11, Catch2)" ON)
option(WANLAB_UNITY "Compile the libraries and the unit tests in unity batches" ON)

set(WANLAB_PCH_HEADERS
  <algorithm> <chrono> <filesystem> <functional> <map> <memory> <optional> <string>
  <string_view> <vector>
  <fmt/format.h> <nlohmann/json.hpp> <toml++/toml.h>)

# The linker: lld links the large test programs several times faster than ld.bfd.
include(CheckLinkerFlag)
check_linker_flag(CXX -fuse-ld=lld WANLAB_HAVE_LLD)
if(WANLAB_HAVE_LLD)
  add_link_options(-fuse-ld=lld)
endif()

# wanlab_pch_host(NAME [HEADERS <h>...] [LINK target...]): a precompiled header of the shared set
# plus HEADERS, compiled once in its own target, for wanlab_precompile to hand out. GCC takes a
# header only where every macro it was built with is defined alike, so a host carries no
# definitions of its own (the test programs each define others).
function(wanlab_pch_host name)
  if(NOT WANLAB_PCH)
    return()
  endif()
  cmake_parse_arguments(arg "" "" "HEADERS;LINK" ${ARGN})
  add_library(${name} OBJECT ${PROJECT_SOURCE_DIR}/cmake/pch.cpp)
  target_link_libraries(${name} PRIVATE tomlplusplus::tomlplusplus fmt::fmt nlohmann_json::nlohmann_json ${arg_LINK})
  target_precompile_headers(${name} PRIVATE ${WANLAB_PCH_HEADERS} ${arg_HEADERS})
endfunction()

# wanlab_precompile(TARGET... [FROM host]): TARGETs include the host's header (wanlab_pch, the
# libraries' one, by default) instead of parsing those headers again.
function(wanlab_precompile)
  if(NOT WANLAB_PCH)
    return()
  endif()
  cmake_parse_arguments(arg "" "FROM" "" ${ARGN})
  if(NOT arg_FROM)
    set(arg_FROM wanlab_pch)
  endif()
  foreach(t IN LISTS arg_UNPARSED_ARGUMENTS)
    target_precompile_headers(${t} REUSE_FROM ${arg_FROM})
  endforeach()
endfunction()

wanlab_pch_host(wanlab_pch)

# wanlab_unity(TARGET...): TARGETs compile in unity batches of 8 files. A file that cannot share
# a batch (file-local names that clash, headers that collide) is marked SKIP_UNITY_BUILD_INCLUSION
# beside its target, with the reason.
function(wanlab_unity)
  if(NOT WANLAB_UNITY)
    return()
  endif()
  foreach(t IN LISTS ARGN)
    set_target_properties(${t} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endforeach()
endfunction()

# wanlab_test_optimization(TARGET...): the test programs' own code at -O1 in optimized builds.
# A Catch2 test case is one long function of expression templates that -O2 spends most of its
# compile time on (a unity batch of the unit tests: 37.5 s at -O2, 25.1 s at -O1) for code that
# runs once; everything a test measures or loops over is the libraries', which stay at the
# build type's level. The test PCH host takes the same level, as GCC requires of a PCH.
function(wanlab_test_optimization)
  foreach(t IN LISTS ARGN)
    if(TARGET ${t})
      target_compile_options(${t} PRIVATE $<$<CONFIG:Release,RelWithDebInfo,MinSizeRel>:-O1>)
    endif()
  endforeach()
endfunction()
