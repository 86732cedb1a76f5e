# Helpers that give every Crest target the same warnings and layout.
# Warnings apply to Crest's own targets only, never to generated code or packages.

set(CREST_WARNINGS -Wall -Wextra -Wpedantic)
if(CREST_WERROR)
  list(APPEND CREST_WARNINGS -Werror)
endif()

# crest_library(NAME SOURCES... [DEPS targets...])
function(crest_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${CREST_WARNINGS})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${ARG_DEPS})
endfunction()

# Every executable of a TSan build defines absl::Mutex's members itself
# (CREST_TSAN_ABSL_SYNC) and exports them, so that the shared libraries'
# calls reach those definitions too.
function(_crest_executable_extras name)
  if(CREST_TSAN_ABSL_SYNC)
    target_link_libraries(${name} PRIVATE crest_tsan_absl_sync)
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  endif()
endfunction()

# crest_binary(NAME SOURCES... [DEPS targets...]): a thin main.
function(crest_binary name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${CREST_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  _crest_executable_extras(${name})
endfunction()

# crest_test(NAME SOURCES... [DEPS targets...] [LABELS labels...])
# A GoogleTest binary; every TEST becomes its own ctest entry.
function(crest_test name)
  # RESOURCE_LOCK: a name the binary's tests hold while they run, so ctest -j
  # never runs two of them at once (a fixed port they all use).
  cmake_parse_arguments(ARG "" "RESOURCE_LOCK" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE ${CREST_WARNINGS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} crest_testing GTest::gmock GTest::gtest_main)
  _crest_executable_extras(${name})
  # Test bodies are built for debugging (-Og): they exercise the product code,
  # which stays -O2 in the libraries they link, and they compile in half the time.
  target_compile_options(${name} PRIVATE $<$<CONFIG:RelWithDebInfo>:-Og>)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  # Sanitizer builds run only the unit and integration suites: their e2e and
  # fault binaries are left out of `all` (and of ctest) to save build time.
  if(NOT CREST_BUILD_E2E AND ARG_LABELS MATCHES "e2e|faults")
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL ON)
    return()
  endif()
  set(lock)
  if(ARG_RESOURCE_LOCK)
    set(lock RESOURCE_LOCK "${ARG_RESOURCE_LOCK}")
  endif()
  gtest_discover_tests(${name}
    DISCOVERY_TIMEOUT 60
    PROPERTIES ${lock} LABELS "${ARG_LABELS}"
               # One value per property: a list here would be split into property names.
               ENVIRONMENT "CREST_BIN_DIR=${CMAKE_BINARY_DIR}/bin"
               ENVIRONMENT_MODIFICATION "CREST_SOURCE_DIR=set:${PROJECT_SOURCE_DIR}")
endfunction()
