# How dyngraph finds ggml.
#
# Default: the libggml-python wheel (ggml 0.20.x shared libraries, headers and
# a CMake package under libggml/lib64/cmake/ggml). Its location is asked from
# the build's Python; ggml_DIR is set explicitly because Debian's CMake does not
# search lib64/cmake.
#
# -DDYNGRAPH_GGML_SOURCE=<dir> (or a checkout in third_party/ggml/src) with
# -DDYNGRAPH_GGML_FROM_SOURCE=ON builds ggml from source instead, e.g. for
# native CPU flags (GGML_NATIVE=ON) or CUDA (GGML_CUDA=ON). The libraries are
# then installed next to the extension.

option(DYNGRAPH_GGML_FROM_SOURCE "Build ggml from a source checkout instead of using libggml-python" OFF)
set(DYNGRAPH_GGML_SOURCE "${CMAKE_CURRENT_LIST_DIR}/src" CACHE PATH "ggml source checkout")

if(DYNGRAPH_GGML_FROM_SOURCE)
  if(NOT EXISTS "${DYNGRAPH_GGML_SOURCE}/CMakeLists.txt")
    message(FATAL_ERROR "DYNGRAPH_GGML_FROM_SOURCE=ON but ${DYNGRAPH_GGML_SOURCE} holds no ggml checkout")
  endif()
  set(BUILD_SHARED_LIBS ON)
  add_subdirectory("${DYNGRAPH_GGML_SOURCE}" ggml-build)
  set(DYNGRAPH_GGML_TARGETS ggml ggml-base ggml-cpu)
  set(DYNGRAPH_GGML_INSTALL_LIBS ggml ggml-base ggml-cpu)
  set(DYNGRAPH_GGML_RPATH "$ORIGIN")
else()
  dyngraph_py_query(LIBGGML_ROOT "import libggml, os; print(os.path.dirname(libggml.__file__))"
    "the libggml-python wheel (pip install libggml-python)")
  set(ggml_DIR "${LIBGGML_ROOT}/lib64/cmake/ggml")
  find_package(ggml CONFIG REQUIRED)
  set(DYNGRAPH_GGML_TARGETS ggml::ggml ggml::ggml-base ggml::ggml-cpu)
  # installed side by side in site-packages: dyngraph/_backend*.so -> libggml/lib64
  set(DYNGRAPH_GGML_RPATH "$ORIGIN/../libggml/lib64")
  message(STATUS "dyngraph: ggml from ${LIBGGML_ROOT}")
endif()
