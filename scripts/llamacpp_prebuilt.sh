#!/usr/bin/env bash
# llama.cpp's anchor build made OFF the GPU machine, so a short device session spends no GPU time
# compiling it (the build takes ~7 min of a 16-core device machine, ~40 min of 2 CPU cores).
# Same source (../shared/anchors/llama.cpp-2026-08.tar.xz), same CMake flags and the same path
# (/tmp/llamacpp-anchor/llama.cpp/b/bin, where llamacpp.sh and compare_llamacpp.sh look) as
# `llamacpp.sh build`; CUDA 13.0's nvcc, like the device image's.
#
#   bash scripts/llamacpp_prebuilt.sh build ARCH   # here (nvcc, no GPU): ARCH as nvidia-smi's
#                                                  # compute_cap without the dot (H100/H200: 90)
#   bash scripts/llamacpp_prebuilt.sh pack         # -> .carry/llamacpp-bin.tar.xz (carry it)
#   bash scripts/llamacpp_prebuilt.sh unpack       # on the GPU machine, before compare_llamacpp.sh
#
# Without a GPU there is no libcuda.so to link against: `build` links a stub of the driver
# symbols that ggml-cuda calls (soname libcuda.so.1, so the real driver is the one loaded at run
# time), and needs cuBLAS for CUDA 13 in the toolkit (the `nvidia-cublas` wheel's lib/ and
# include/ copied into it, when the local toolkit lacks them).
set -euo pipefail
B=/tmp/llamacpp-anchor
src=${ANCHORS:-$(cd "$(dirname "$0")/.." && pwd)/.carry/anchors}
stub=$B/cudastub
tarball=$(cd "$(dirname "$0")/.." && pwd)/.carry/llamacpp-bin.tar.xz

cmake_flags() {
  echo -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$1" -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DCUDA_cuda_driver_LIBRARY="$stub/libcuda.so"
}

make_stub() {  # $1: file of symbol names (empty: a placeholder so CMake configures)
  mkdir -p "$stub"
  { echo "/* stub of the CUDA driver for linking only */"
    while read -r s; do [ -n "$s" ] && echo "void $s(void) {}"; done < "$1"; } > "$stub/stub.c"
  gcc -shared -fPIC -o "$stub/libcuda.so" -Wl,-soname,libcuda.so.1 "$stub/stub.c"
  ln -sf libcuda.so "$stub/libcuda.so.1"  # the executables link it by its soname
}

case "${1:-}" in
  build)
    arch=${2:?give the GPU arch, e.g. 90}
    cuda=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
    ls "$cuda"/lib*/libcublas.so >/dev/null 2>&1 || { echo "no libcublas.so under $cuda: copy the" \
      "nvidia-cublas wheel's nvidia/cu13/lib/* and include/* into it (and link libcublas.so," \
      "libcublasLt.so to their .so.13)"; exit 1; }
    mkdir -p $B && cd $B && rm -rf llama.cpp && tar xJf "$src/llama.cpp-2026-08.tar.xz" && cd llama.cpp
    : > $B/driver_symbols.txt; make_stub $B/driver_symbols.txt
    # shellcheck disable=SC2046
    cmake -B b $(cmake_flags "$arch") > $B/cmake.log 2>&1 || { tail -20 $B/cmake.log; exit 1; }
    cmake --build b -j"$(nproc)" --target ggml-cuda > $B/build.log 2>&1 || { tail -20 $B/build.log; exit 1; }
    # the driver symbols ggml-cuda needs: undefined in it, not defined by cudart / cuBLAS
    nm -D --undefined-only b/bin/libggml-cuda.so | awk '{print $2}' | grep -E '^cu[A-Z]' \
      | sed 's/@.*//' | sort -u > $B/driver_symbols.txt
    make_stub $B/driver_symbols.txt
    echo "$(wc -l < $B/driver_symbols.txt) driver symbols stubbed"
    rc=0; cmake --build b -j"$(nproc)" --target llama-bench llama-batched-bench >> $B/build.log 2>&1 || rc=$?
    echo "BUILD_RC=$rc" >> $B/build.log; tail -2 $B/build.log; exit $rc ;;
  pack)  # build.log ends in BUILD_RC=0, which `llamacpp.sh wait` looks for
    cd $B && tar cJf "$tarball" build.log llama.cpp/b/bin
    ls -la "$tarball" ;;
  unpack)
    [ -f "$tarball" ] || { echo "missing $tarball: carry it"; exit 2; }
    mkdir -p $B && tar xJf "$tarball" -C $B
    # a library the binaries miss (cuBLAS / cudart of CUDA 13 outside the toolkit's lib64 on this
    # image) is linked into bin/, which is on their run path
    bin=$B/llama.cpp/b/bin
    for _ in 1 2 3; do  # again for what a linked library needs in turn (cuBLAS -> cuBLASLt)
      for lib in $(ldd "$bin/llama-bench" "$bin"/*.so | awk '/not found/ {print $1}' | sort -u); do
        found=$(find /usr /opt -name "$lib" 2>/dev/null | head -1)
        [ -n "$found" ] && ln -sf "$found" "$bin/$lib" && echo "linked $found"
      done
    done
    ldd "$bin/llama-bench" "$bin"/*.so | grep "not found" || echo "llama.cpp binaries: every library found"
    "$bin/llama-bench" --help > /dev/null 2>&1 && echo "llama-bench runs" || echo "llama-bench does not run" ;;
  *) sed -n '2,18p' "$0"; exit 2 ;;
esac
