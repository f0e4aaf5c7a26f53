# drift_library(<folder> SOURCES ... [DEPS ...] [AVX2_SOURCES ...] [AVX512_SOURCES ...])
#
# One static library per folder of src/, named drift_<folder>. Its headers are reachable as
# "<folder>/header.h" only by targets that link it: each library gets a private include root in
# the build tree holding a single symlink to its own folder, so an include that points up the
# layers of ARCHITECTURE.md fails to build instead of silently working.
#
# SIMD sources are compiled with their own -m flags; everything else targets baseline x86-64 so
# that one binary runs on AVX2-only (or older) CPUs, with the ISA chosen at run time.
function(drift_library folder)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS;AVX2_SOURCES;AVX512_SOURCES" ${ARGN})
  set(target drift_${folder})
  add_library(${target} STATIC ${ARG_SOURCES} ${ARG_AVX2_SOURCES} ${ARG_AVX512_SOURCES})
  set(root ${CMAKE_BINARY_DIR}/include_roots/${folder})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${root}/${folder} SYMBOLIC)
  target_include_directories(${target} PUBLIC ${root})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  if(ARG_AVX2_SOURCES)
    set_source_files_properties(${ARG_AVX2_SOURCES} PROPERTIES
      COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
  endif()
  if(ARG_AVX512_SOURCES)
    set_source_files_properties(${ARG_AVX512_SOURCES} PROPERTIES
      COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx2;-mfma;-mf16c;-mbmi2")
  endif()
endfunction()
