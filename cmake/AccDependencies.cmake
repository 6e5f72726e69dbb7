# System dependencies, all from Debian packages installed by scripts/setup.
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(TBB REQUIRED)
find_package(dnnl REQUIRED)
find_package(OpenMP REQUIRED)   # oneDNN's CPU runtime on Debian is OpenMP; we size its pool.
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(Poco REQUIRED COMPONENTS Foundation JSON Util)
find_package(ZLIB REQUIRED)     # CRC-32 checksums of checkpoint files
find_package(Threads REQUIRED)
