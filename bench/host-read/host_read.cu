// How fast a kernel reads page-locked host memory mapped into the GPU's address space (zero-copy), the rate the
// experts-in-RAM design of bench/NOTES.md (2026-12-07, issue 11) rests on: 16-byte loads by every warp over a
// buffer in host memory, against cudaMemcpy's page-locked copy of the same bytes and the same kernel over device
// memory; then the host read and a device read in one launch (half the blocks each), to see whether the PCIe
// reads hold the HBM reads back. Prints GB/s. Build: nvcc -O3 -arch=sm_90 -o host_read host_read.cu
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s\n", #x, cudaGetErrorString(e)); std::exit(1); } } while (0)

// Block b reads [b * per, (b + 1) * per) of src_a when b < split, else of src_b (offset by split), summing the
// words so the loads cannot be dropped.
__global__ void read_kernel(const uint4* a, const uint4* b, size_t per, unsigned split, unsigned* sink) {
  const uint4* src = blockIdx.x < split ? a + size_t(blockIdx.x) * per : b + size_t(blockIdx.x - split) * per;
  unsigned acc = 0;
  for (size_t i = threadIdx.x; i < per; i += blockDim.x) { const uint4 v = src[i]; acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x12345678u) *sink = acc;
}

static float timed(cudaEvent_t e0, cudaEvent_t e1) { float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); return ms; }

int main(int argc, char** argv) {
  const size_t bytes = size_t(argc > 1 ? std::atoi(argv[1]) : 1024) << 20;  // MiB
  const unsigned blocks = 132 * 8, threads = 256;
  const size_t per = bytes / 16 / blocks;
  uint4 *host, *host_dev, *dev; unsigned* sink;
  CK(cudaHostAlloc(&host, bytes, cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&host_dev, host, 0));
  CK(cudaMalloc(&dev, bytes)); CK(cudaMalloc(&sink, 4));
  for (size_t i = 0; i < bytes / 16; ++i) host[i] = make_uint4(unsigned(i), 1, 2, 3);
  CK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const double gb = double(per) * 16 * blocks / 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    CK(cudaEventRecord(e0)); CK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice)); CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1)); const float copy = timed(e0, e1);
    CK(cudaEventRecord(e0)); read_kernel<<<blocks, threads>>>(host_dev, host_dev, per, blocks, sink); CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1)); const float zc = timed(e0, e1);
    CK(cudaEventRecord(e0)); read_kernel<<<blocks, threads>>>(dev, dev, per, blocks, sink); CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1)); const float hbm = timed(e0, e1);
    // Half the blocks over host memory, half over device memory, one launch: each half reads half the bytes.
    CK(cudaEventRecord(e0)); read_kernel<<<blocks, threads>>>(host_dev, dev, per, blocks / 2, sink); CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1)); const float mixed = timed(e0, e1);
    CK(cudaGetLastError());
    std::printf("%.2f GB: page-locked copy %.1f GB/s; kernel over mapped host memory %.1f GB/s; over device memory "
                "%.0f GB/s; half and half in one launch %.2f ms (host half alone would take %.2f ms)\n",
                gb, gb / copy * 1e3, gb / zc * 1e3, gb / hbm * 1e3, mixed, zc / 2);
  }
  return 0;
}
