# find_package(dyngraph): the C API of dyngraph as the imported target dyngraph::dyngraph.
# This file lies in <root>/cmake; the header in <root>/include, libdyngraph.so in <root>
# (<root>: the installed Python package's folder, `python -m dyngraph --cmake-dir` prints this folder).
get_filename_component(_dyngraph_root "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
set(dyngraph_INCLUDE_DIR "${_dyngraph_root}/include")
set(dyngraph_LIBRARY "${_dyngraph_root}/libdyngraph.so")
if(NOT EXISTS "${dyngraph_INCLUDE_DIR}/dyngraph/dyngraph.h" OR NOT EXISTS "${dyngraph_LIBRARY}")
  set(dyngraph_FOUND FALSE)
  set(dyngraph_NOT_FOUND_MESSAGE "dyngraph: no include/dyngraph/dyngraph.h or libdyngraph.so under ${_dyngraph_root}")
  return()
endif()
if(NOT TARGET dyngraph::dyngraph)
  add_library(dyngraph::dyngraph SHARED IMPORTED)
  set_target_properties(dyngraph::dyngraph PROPERTIES
    IMPORTED_LOCATION "${dyngraph_LIBRARY}"
    IMPORTED_SONAME "libdyngraph.so"
    INTERFACE_INCLUDE_DIRECTORIES "${dyngraph_INCLUDE_DIR}")
endif()
set(dyngraph_LIBRARIES dyngraph::dyngraph)
set(dyngraph_INCLUDE_DIRS "${dyngraph_INCLUDE_DIR}")
unset(_dyngraph_root)
