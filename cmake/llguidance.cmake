# llguidance (crates.io), the grammar library behind constrained decoding (src/constrain/), built
# by cargo from src/constrain/llguidance_ffi as a static library with a C API. Gives the imported
# target `llguidance` (the library and the directory of its llguidance.h).
#
# Cargo comes from rustup (~/.cargo/bin or PATH): Debian's is too old for llguidance. Its build
# directory is shared by every build tree of the checkout's user ($DRIFT_CACHE/cargo-target), so
# the release and sanitizer trees compile the Rust code once.
find_program(CARGO cargo HINTS $ENV{HOME}/.cargo/bin)
if(NOT CARGO)
  message(FATAL_ERROR "cargo not found (PATH, ~/.cargo/bin): constrained decoding needs rustup's "
                      "cargo to build llguidance; scripts/setup.sh checks for it")
endif()

set(_crate ${CMAKE_SOURCE_DIR}/src/constrain/llguidance_ffi)
if(DEFINED ENV{DRIFT_CACHE})
  set(_cache $ENV{DRIFT_CACHE})
else()
  set(_cache $ENV{HOME}/.cache/drift)
endif()
set(DRIFT_CARGO_TARGET_DIR ${_cache}/cargo-target CACHE PATH "cargo's build directory for llguidance")

# The header ships in the llguidance crate: find the crate's source directory through cargo
# (which downloads the locked dependencies on first use).
execute_process(
  COMMAND ${CARGO} metadata --format-version 1 --locked --manifest-path ${_crate}/Cargo.toml
  OUTPUT_VARIABLE _metadata RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "cargo metadata failed for ${_crate}:\n${_err}")
endif()
string(JSON _count LENGTH "${_metadata}" packages)
math(EXPR _last "${_count} - 1")
set(_header_dir "")
foreach(_i RANGE ${_last})
  string(JSON _name GET "${_metadata}" packages ${_i} name)
  if(_name STREQUAL "llguidance")
    string(JSON _manifest GET "${_metadata}" packages ${_i} manifest_path)
    get_filename_component(_header_dir ${_manifest} DIRECTORY)
  endif()
endforeach()
if(NOT EXISTS ${_header_dir}/llguidance.h)
  message(FATAL_ERROR "llguidance.h not found in the llguidance crate (${_header_dir})")
endif()

set(_lib ${DRIFT_CARGO_TARGET_DIR}/release/libdrift_llguidance.a)
# Not --quiet: on a first build cargo compiles ~60 crates for a minute or two, and its lines are
# the progress a user sees meanwhile (the console pool gives it the terminal).
add_custom_command(
  OUTPUT ${_lib}
  COMMAND ${CARGO} build --release --locked --manifest-path ${_crate}/Cargo.toml
          --target-dir ${DRIFT_CARGO_TARGET_DIR}
  DEPENDS ${_crate}/Cargo.toml ${_crate}/Cargo.lock ${_crate}/src/lib.rs
  COMMENT "cargo: building llguidance (a minute or two the first time)"
  USES_TERMINAL)
add_custom_target(llguidance_build DEPENDS ${_lib})

add_library(llguidance STATIC IMPORTED GLOBAL)
set_target_properties(llguidance PROPERTIES IMPORTED_LOCATION ${_lib})
target_include_directories(llguidance INTERFACE ${_header_dir})
target_link_libraries(llguidance INTERFACE Threads::Threads ${CMAKE_DL_LIBS} m)
# Only a link needs the library (its header is in the crate's source, there since configure).
# Ninja builds it for the first link that names the file, so the C++ compiles of constrain and of
# everything above it run while cargo does; a target-level dependency would hold every one of
# them until cargo finishes. Other generators know no rule for the file: they get the dependency.
if(NOT CMAKE_GENERATOR MATCHES "Ninja")
  add_dependencies(llguidance llguidance_build)
endif()
