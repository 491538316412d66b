# How dyngraph gets ggml (third_party/ggml/README.md).
#
# DYNGRAPH_GGML=source (default): ggml built with this build, for the machine
# it runs on (GGML_NATIVE=ON), with the RPC backend (GGML_RPC=ON) and
# llamafile's sgemm (GGML_LLAMAFILE=ON). The source is the libggml-python
# sdist from PyPI, the same ggml version the wheel ships, fetched with pip into
# the build tree (DYNGRAPH_GGML_SOURCE=<dir> builds a ggml tree you have
# instead). The libraries are installed next to the extension; any GGML_*
# option (-Ccmake.define.GGML_NATIVE=OFF, GGML_CUDA=ON, ...) is passed on.
#
# DYNGRAPH_GGML=wheel: the prebuilt libggml-python wheel (AVX2 CPU backend,
# no RPC), fetched with pip into the build tree; its libraries are copied next
# to the extension too. Either way the installed package needs no ggml package
# at run time.

# The instruction sets ggml-cpu is never compiled with (docs/guide/cpu-numerics.md),
# whatever -march=native (GGML_NATIVE) or a GGML_* option turns on:
# - AVX512-FP16: with __AVX512FP16__ ggml's f16 vectors are __m512h and its f16
#   dot products (ggml_vec_dot_f16: 1-row f16 MatMul) accumulate in f16, which
#   overflows and loses the sums (issue 20); dyngraph accumulates f16 and bf16
#   products in f32 on every CPU.
# - AMX (tile, int8, bf16, fp16, complex): ggml's AMX buffer type runs tile
#   instructions that need the OS to enable the tile state (XCR0, arch_prctl
#   ARCH_REQ_XCOMP_PERM) and die with SIGILL where it does not (a VM that lists
#   AMX); dyngraph does not use that path.
# - Arm's FP16 vector arithmetic, for the same reason (below).
# The -mno-* flags go after ggml's own (-march=native, -mavx512f, ...), so they win.
# Each is passed only where the compiler knows it: one that does not cannot emit
# those instructions either. The final flags are recorded for the extension
# (dyngraph._backend.build_info(), tested by tests/test_build_rules.py).
set(DYNGRAPH_GGML_CPU_NO_ISA -mno-avx512fp16 -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -mno-amx-fp16 -mno-amx-complex)
function(dyngraph_ggml_cpu_isa_rule)
  if(NOT TARGET ggml-cpu)
    message(FATAL_ERROR "dyngraph: this ggml build has no ggml-cpu target (GGML_BACKEND_DL is not supported)")
  endif()
  set(added "")
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64|i.86)$" AND NOT MSVC)
    include(CheckCCompilerFlag)
    foreach(flag ${DYNGRAPH_GGML_CPU_NO_ISA})
      string(MAKE_C_IDENTIFIER "DYNGRAPH_CC_HAS${flag}" var)
      check_c_compiler_flag(${flag} ${var})
      if(${var})
        list(APPEND added ${flag})
      endif()
    endforeach()
    target_compile_options(ggml-cpu PRIVATE ${added})
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$" AND NOT MSVC)
    # Arm's FP16 vector arithmetic: the same loss as AVX512-FP16 above (arm_no_fp16_va.h says how)
    list(APPEND added "-include${CMAKE_SOURCE_DIR}/third_party/ggml/arm_no_fp16_va.h")
    target_compile_options(ggml-cpu PRIVATE "$<$<COMPILE_LANGUAGE:C,CXX>:${added}>")
  endif()
  get_target_property(opts ggml-cpu COMPILE_OPTIONS)
  # what reaches ggml-cpu's sources: its instruction-set flags (-m*) in order
  set(isa_flags "")
  foreach(o ${opts})
    if(o MATCHES "^-m")
      list(APPEND isa_flags "${o}")
    endif()
  endforeach()
  if(added MATCHES "-include")
    list(APPEND isa_flags ${added})
  endif()
  set(DYNGRAPH_GGML_CPU_ISA_FLAGS "${isa_flags}" PARENT_SCOPE)
  message(STATUS "dyngraph: ggml-cpu instruction-set flags: ${isa_flags}")
endfunction()

set(DYNGRAPH_GGML "source" CACHE STRING "where ggml comes from: source (built for this machine) or wheel (prebuilt, AVX2)")
set_property(CACHE DYNGRAPH_GGML PROPERTY STRINGS source wheel)
set(DYNGRAPH_GGML_SOURCE "" CACHE PATH "a ggml source tree to build (default: the libggml-python sdist, fetched with pip)")
set(DYNGRAPH_GGML_SDIST "libggml-python==0.20.2.post1")  # the ggml version dyngraph pins (0.20.2)
string(REGEX REPLACE ".*==" "" ggml_pin "${DYNGRAPH_GGML_SDIST}")

if(DYNGRAPH_GGML STREQUAL "source")
  if(DYNGRAPH_GGML_SOURCE STREQUAL "")
    # pip download of the sdist once per build tree (scikit-build-core keeps it across installs)
    set(sdist_dir "${CMAKE_BINARY_DIR}/ggml-sdist-${ggml_pin}")  # a new pin fetches anew
    file(GLOB sdist_tree "${sdist_dir}/libggml_python-${ggml_pin}/ggml/CMakeLists.txt")
    if(NOT sdist_tree)
      message(STATUS "dyngraph: fetching the ggml source (${DYNGRAPH_GGML_SDIST} sdist) with pip")
      execute_process(
        COMMAND "${Python_EXECUTABLE}" -m pip download --no-deps --no-binary libggml-python --disable-pip-version-check
                --quiet -d "${sdist_dir}" "${DYNGRAPH_GGML_SDIST}"
        RESULT_VARIABLE rc)
      file(GLOB archive "${sdist_dir}/libggml_python-${ggml_pin}.tar.gz")
      if(NOT rc EQUAL 0 OR NOT archive)
        message(FATAL_ERROR "dyngraph: could not download the ${DYNGRAPH_GGML_SDIST} sdist with pip. Without network, "
                            "pass a ggml source tree (-Ccmake.define.DYNGRAPH_GGML_SOURCE=/path/to/ggml) or take the "
                            "prebuilt wheel (-Ccmake.define.DYNGRAPH_GGML=wheel).")
      endif()
      execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xzf "${archive}" WORKING_DIRECTORY "${sdist_dir}" RESULT_VARIABLE rc)
      file(GLOB sdist_tree "${sdist_dir}/libggml_python-${ggml_pin}/ggml/CMakeLists.txt")
      if(NOT rc EQUAL 0 OR NOT sdist_tree)
        message(FATAL_ERROR "dyngraph: ${archive} holds no ggml/CMakeLists.txt")
      endif()
    endif()
    get_filename_component(ggml_src "${sdist_tree}" DIRECTORY)
  else()
    set(ggml_src "${DYNGRAPH_GGML_SOURCE}")
    if(NOT EXISTS "${ggml_src}/CMakeLists.txt")
      message(FATAL_ERROR "DYNGRAPH_GGML_SOURCE=${ggml_src} holds no ggml source tree (no CMakeLists.txt)")
    endif()
  endif()
  # dyngraph's defaults; a -D on the command line wins (option() and set(CACHE) keep a value already set)
  set(GGML_NATIVE ON CACHE BOOL "ggml: optimize the build for the current system")
  set(GGML_RPC ON CACHE BOOL "ggml: use RPC")
  set(GGML_LLAMAFILE ON CACHE BOOL "ggml: use LLAMAFILE")
  set(GGML_OPENMP OFF CACHE BOOL "ggml: use OpenMP")  # dyngraph's engines run ggml's own thread pools
  set(GGML_CCACHE OFF CACHE BOOL "ggml: use ccache if available")
  # (CUDA builds) ggml-cuda replays a graph it has seen as one CUDA graph, as llama.cpp builds it
  set(GGML_CUDA_GRAPHS ON CACHE BOOL "ggml: use CUDA graphs (llama.cpp only)")
  set(GGML_BUILD_TESTS OFF CACHE BOOL "ggml: build tests")
  set(GGML_BUILD_EXAMPLES OFF CACHE BOOL "ggml: build examples")
  set(BUILD_SHARED_LIBS ON)
  # next to the extension in the build tree too (an in-tree build links the extension from there)
  set(CMAKE_LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}")
  add_subdirectory("${ggml_src}" ggml-build)
  unset(CMAKE_LIBRARY_OUTPUT_DIRECTORY)
  dyngraph_ggml_cpu_isa_rule()
  set(DYNGRAPH_GGML_TARGETS ggml ggml-base ggml-cpu)
  set(DYNGRAPH_GGML_INSTALL_LIBS ggml ggml-base ggml-cpu)
  foreach(t ggml-rpc ggml-cuda ggml-vulkan ggml-blas)
    if(TARGET ${t})
      list(APPEND DYNGRAPH_GGML_INSTALL_LIBS ${t})
    endif()
  endforeach()
  foreach(t ${DYNGRAPH_GGML_INSTALL_LIBS})
    # one file per library, named by its soname (libggml.so.0): a wheel holds no symlinks, so the
    # versioned name and the namelink would each be another copy
    set_property(TARGET ${t} PROPERTY VERSION)
    set_property(TARGET ${t} PROPERTY PUBLIC_HEADER)  # headers are not part of the package
    set_target_properties(${t} PROPERTIES INSTALL_RPATH "$ORIGIN")
    # the C API only: no C++ or standard-library symbols (cmake/ggml-exports.map says why)
    target_link_options(${t} PRIVATE "LINKER:--version-script=${CMAKE_SOURCE_DIR}/cmake/ggml-exports.map")
    set_property(TARGET ${t} APPEND PROPERTY LINK_DEPENDS "${CMAKE_SOURCE_DIR}/cmake/ggml-exports.map")
  endforeach()
  set(DYNGRAPH_GGML_RPATH "$ORIGIN")
  message(STATUS "dyngraph: ggml from source ${ggml_src} (GGML_NATIVE=${GGML_NATIVE}, GGML_RPC=${GGML_RPC})")
elseif(DYNGRAPH_GGML STREQUAL "wheel")
  # the wheel fetched with pip into the build tree (not a build requirement: where pip finds no wheel
  # for the platform it would build the sdist, for a build environment only)
  set(wheel_dir "${CMAKE_BINARY_DIR}/ggml-wheel-${ggml_pin}")
  file(GLOB ggml_config "${wheel_dir}/libggml/lib64/cmake/ggml/ggmlConfig.cmake")
  if(NOT ggml_config)
    message(STATUS "dyngraph: fetching the prebuilt ggml (${DYNGRAPH_GGML_SDIST} wheel) with pip")
    execute_process(
      COMMAND "${Python_EXECUTABLE}" -m pip download --no-deps --only-binary :all: --disable-pip-version-check
              --quiet -d "${wheel_dir}" "${DYNGRAPH_GGML_SDIST}"
      RESULT_VARIABLE rc)
    file(GLOB archive "${wheel_dir}/libggml_python-*.whl")
    if(NOT rc EQUAL 0 OR NOT archive)
      message(FATAL_ERROR "dyngraph: pip found no ${DYNGRAPH_GGML_SDIST} wheel for this platform; build ggml from "
                          "source (the default, DYNGRAPH_GGML=source)")
    endif()
    execute_process(COMMAND "${CMAKE_COMMAND}" -E tar xf "${archive}" WORKING_DIRECTORY "${wheel_dir}" RESULT_VARIABLE rc)
    file(GLOB ggml_config "${wheel_dir}/libggml/lib64/cmake/ggml/ggmlConfig.cmake")
    if(NOT rc EQUAL 0 OR NOT ggml_config)
      message(FATAL_ERROR "dyngraph: ${archive} holds no libggml/lib64/cmake/ggml")
    endif()
  endif()
  get_filename_component(ggml_DIR "${ggml_config}" DIRECTORY)
  find_package(ggml CONFIG REQUIRED NO_DEFAULT_PATH PATHS "${ggml_DIR}")
  set(DYNGRAPH_GGML_TARGETS ggml::ggml ggml::ggml-base ggml::ggml-cpu)
  # the wheel's libraries, under the names the extension asks for (their sonames), next to the extension
  file(GLOB DYNGRAPH_GGML_INSTALL_FILES "${wheel_dir}/libggml/lib64/libggml*.so.0")
  set(DYNGRAPH_GGML_RPATH "$ORIGIN")
  message(STATUS "dyngraph: ggml from the prebuilt wheel in ${wheel_dir}")
else()
  message(FATAL_ERROR "DYNGRAPH_GGML=${DYNGRAPH_GGML}: choose source or wheel")
endif()
