# System dependencies, all from Debian packages installed by scripts/setup.
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(TBB REQUIRED)
find_package(dnnl REQUIRED)
find_package(OpenMP REQUIRED)   # oneDNN's CPU runtime on Debian is OpenMP; we size its pool.
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(Poco REQUIRED COMPONENTS Foundation JSON Util)
find_package(ZLIB REQUIRED)     # CRC-32s combined (checkpoint loads); the reference CRC-32 in tests/io
# ISA-L (libisal-dev): CRC-32 of checkpoint files; Debian ships no CMake package for it.
find_path(ISAL_INCLUDE_DIR isa-l/crc.h REQUIRED)
find_library(ISAL_LIBRARY isal REQUIRED)
add_library(ISAL::isal UNKNOWN IMPORTED)
set_target_properties(ISAL::isal PROPERTIES IMPORTED_LOCATION ${ISAL_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${ISAL_INCLUDE_DIR})
find_package(Threads REQUIRED)
