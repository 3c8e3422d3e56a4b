# The libraries whose code runs once per job (the ONNX importer, the IR and its passes,
# autodiff, the zoo's builders, the tokenizer.json reader) gain nothing from this
# machine's widest vectors. A native build compiles them for any AVX2 CPU (x86-64-v3)
# where this CPU has AVX2, so that the GPU bundle, which is built for x86-64-v3
# (scripts/gpu_bundle.sh), links these objects instead of compiling the libraries a
# second time.
#
#   pipetrain_library(NAME SOURCES...)   add_library(NAME STATIC ...) for every library
#       (SHARED with PIPETRAIN_SHARED_LIBS, as the sanitizer trees build them):
#       a cold library gets the portable -march; with -DPIPETRAIN_REUSE_OBJECTS=DIR (a
#       native build tree whose cold objects are portable and made by the same compiler),
#       it is the archive of DIR's objects of it instead.
# The native tree says what it built in DIR/portable_objects.txt; a bundle tree reuses
# nothing (and says why) unless that matches its own compiler and -march.
set(PIPETRAIN_COLD_LIBS pipetrain_ir pipetrain_importer pipetrain_autodiff pipetrain_models
                        pipetrain_hf)
set(PIPETRAIN_PORTABLE_MARCH x86-64-v3)
# Their -O flag, and the CLI's, after the build type's: -O1 in a Release build, which
# compiles them in 60% of -O3's time (297 -> 179 job-seconds on 2 cores) for code a job
# runs once. Empty: the build type's.
if(CMAKE_BUILD_TYPE STREQUAL "Release")
  set(pipetrain_cold_opt_default -O1)
else()
  set(pipetrain_cold_opt_default "")
endif()
set(PIPETRAIN_COLD_OPT "${pipetrain_cold_opt_default}" CACHE STRING
    "-O flag for the importer, IR, autodiff, zoo, tokenizer.json reader and CLI (empty: the build type's)")
set(PIPETRAIN_REUSE_OBJECTS "" CACHE PATH
    "A native build tree whose portable objects of the cold libraries to link (the GPU bundle)")

# The native flag add_compile_options gave every target (CMakeLists.txt).
set(pipetrain_native_option "$<$<COMPILE_LANGUAGE:CXX>:-march=native>")

# Native on an x86-64 CPU with all of x86-64-v3 (AVX2, FMA, BMI1/2, F16C, LZCNT, MOVBE):
# the cold libraries are built for x86-64-v3; elsewhere they stay native.
set(pipetrain_cold_march "")
if(PIPETRAIN_NATIVE AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -march=native -dM -E -x c++ /dev/null
                  OUTPUT_VARIABLE native_macros ERROR_QUIET RESULT_VARIABLE rc)
  set(has_v3 ON)
  foreach(m __AVX2__ __FMA__ __BMI__ __BMI2__ __F16C__ __LZCNT__ __MOVBE__)
    if(NOT rc EQUAL 0 OR NOT native_macros MATCHES "#define ${m} 1")
      set(has_v3 OFF)
    endif()
  endforeach()
  if(has_v3)
    set(pipetrain_cold_march ${PIPETRAIN_PORTABLE_MARCH})
  endif()
endif()

# What the reused objects must have been made with: this compiler, for this -march.
set(pipetrain_objects_stamp
    "${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION} ${CMAKE_CXX_COMPILER}; -march=${PIPETRAIN_PORTABLE_MARCH} ${PIPETRAIN_COLD_OPT}; ${PIPETRAIN_COLD_LIBS}")
if(pipetrain_cold_march)
  file(WRITE ${CMAKE_BINARY_DIR}/portable_objects.txt "${pipetrain_objects_stamp}\n")
else()
  file(REMOVE ${CMAKE_BINARY_DIR}/portable_objects.txt)
endif()

set(pipetrain_reuse_from "")
if(PIPETRAIN_REUSE_OBJECTS)
  set(stamp_file ${PIPETRAIN_REUSE_OBJECTS}/portable_objects.txt)
  if(NOT PIPETRAIN_MARCH STREQUAL PIPETRAIN_PORTABLE_MARCH OR PIPETRAIN_NATIVE)
    message(STATUS "pipetrain: not reusing ${PIPETRAIN_REUSE_OBJECTS}: this tree is not built for -march=${PIPETRAIN_PORTABLE_MARCH}")
  elseif(NOT EXISTS ${stamp_file})
    message(STATUS "pipetrain: not reusing ${PIPETRAIN_REUSE_OBJECTS}: it has no portable objects (${stamp_file})")
  else()
    file(READ ${stamp_file} their_stamp)
    string(STRIP "${their_stamp}" their_stamp)
    if(their_stamp STREQUAL pipetrain_objects_stamp)
      set(pipetrain_reuse_from ${PIPETRAIN_REUSE_OBJECTS})
      message(STATUS "pipetrain: ${PIPETRAIN_COLD_LIBS} from ${PIPETRAIN_REUSE_OBJECTS}'s objects")
    else()
      message(STATUS "pipetrain: not reusing ${PIPETRAIN_REUSE_OBJECTS}: made by '${their_stamp}', this tree needs '${pipetrain_objects_stamp}'")
    endif()
  endif()
endif()

set(pipetrain_library_type STATIC)
if(PIPETRAIN_SHARED_LIBS)
  set(pipetrain_library_type SHARED)
endif()

function(pipetrain_library name)
  if(NOT name IN_LIST PIPETRAIN_COLD_LIBS)
    add_library(${name} ${pipetrain_library_type} ${ARGN})
  elseif(pipetrain_reuse_from)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
    file(GLOB_RECURSE objects ${pipetrain_reuse_from}/${rel}/CMakeFiles/${name}.dir/*.o)
    if(NOT objects)
      message(FATAL_ERROR "${pipetrain_reuse_from} has no objects of ${name}: build it first (ninja -C ${pipetrain_reuse_from} ${name})")
    endif()
    add_library(${name} STATIC ${objects})
    set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX)
  else()
    add_library(${name} ${pipetrain_library_type} ${ARGN})
    if(PIPETRAIN_COLD_OPT)
      target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${PIPETRAIN_COLD_OPT}>)
    endif()
    if(pipetrain_cold_march)
      get_target_property(options ${name} COMPILE_OPTIONS)
      list(REMOVE_ITEM options "${pipetrain_native_option}")
      set_target_properties(${name} PROPERTIES COMPILE_OPTIONS "${options}")
      target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=${pipetrain_cold_march}>)
    endif()
  endif()
endfunction()
