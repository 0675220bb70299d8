"""Hand-written CUDA C kernels used by the runtime tests (emulator and GPU)."""
from gpudsl.runtime.signature import KernelSig

SOURCE = r'''
#line 1 "mykernels.py"
extern "C" __global__ void __launch_bounds__(256)
saxpy2d(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
  int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void __launch_bounds__(256) reduce256(const float* x, float* out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  int i = blockIdx.x * 256 + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int w = 128; w > 0; w >>= 1) {
    if (t < w) s[t] += s[t + w];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}

#define TILE 16
extern "C" __global__ void __launch_bounds__(256)
matmul16(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
         int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (col < N && k0 + ty < K) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

extern "C" __global__ void atomics(int* counter, float* fsum, double* dsum, unsigned long long* lsum,
                                   int* imax, unsigned* umin, int* cas_winner, float* fexch) {
  int id = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(counter, 1);
  atomicAdd(fsum, 0.5f);
  atomicAdd(dsum, (double)id);
  atomicAdd(lsum, (unsigned long long)id * 1000000000ull);
  atomicMax(imax, id);
  atomicMin(umin, (unsigned)(id + 7));
  if (atomicCAS(cas_winner, -1, id) == -1) atomicExch(fexch, (float)id);
}

extern "C" __global__ void divergent(float* x) {
  if (threadIdx.x < 16) {
    x[threadIdx.x] = 1.0f;
    __syncthreads();
  }
}

extern "C" __global__ void two_sites(float* x) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  x[threadIdx.x] = 2.0f;
}

extern "C" __global__ void warp_sum(const float* x, float* out) {
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  unsigned b = __ballot_sync(0xffffffffu, v > 0.0f);
  if ((threadIdx.x & 31) == 0) out[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = v + (b == 0xffffffffu ? 0.0f : 1000.0f);
}

extern "C" __global__ void count_and_dyn(const int* flags, int* out) {
  extern __shared__ float dyn[];
  int t = threadIdx.x;
  dyn[t] = (float)t;
  int c = __syncthreads_count(flags[t] != 0);
  out[t] = c + (int)dyn[blockDim.x - 1 - t];
}

extern "C" __global__ void trapper(float* x) {
  if (threadIdx.x == 3) __trap();
  x[threadIdx.x] = 1.0f;
}

extern "C" __global__ void mathy(const float* x, float* y, double* z, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
  float4 q = make_float4(v, 2.0f * v, 3.0f, 4.0f);
  y[i] = tanhf(v) + expf(-v) + sqrtf(v) + rsqrtf(v + 1.0f) + fminf(v, 0.5f) + fmaxf(v, 0.25f)
       + fabsf(-v) + logf(v + 1.0f) + __expf(v) + min(v, 1.0f) + max(i, 3) + __ldg(&x[i]) + q.y;
  z[i] = exp((double)v) + min(2.0, (double)v);
}
'''

SIGS = [
    KernelSig("saxpy2d", ["int", "float", "const float* __restrict__", "float* __restrict__"],
              ["n", "a", "x", "y"]),
    KernelSig("reduce256", ["const float*", "float*", "int"]),
    KernelSig("matmul16", ["const float*", "const float*", "float*", "int", "int", "int"]),
    KernelSig("atomics", ["int*", "float*", "double*", "unsigned long long*", "int*", "unsigned*", "int*",
                          "float*"]),
    KernelSig("divergent", ["float*"]),
    KernelSig("two_sites", ["float*"]),
    KernelSig("warp_sum", ["const float*", "float*"]),
    KernelSig("count_and_dyn", ["const int*", "int*"]),
    KernelSig("trapper", ["float*"]),
    KernelSig("mathy", ["const float*", "float*", "double*", "int"]),
]
