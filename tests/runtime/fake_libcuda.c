/* A stand-in for libcuda.so used to test gpudsl.runtime.device's plumbing without a GPU:
   "device" memory is host memory and a launch only records its configuration and
   parameter values. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t last[32];
static double fake_ms;  /* the fake GPU clock that events read */
static int nmemset; static size_t last_memset;
static unsigned last_cfg[7];
static int nlaunch;
static int nspin;  /* launches of gpudsl_spin (timing's spin kernel) */
static int event_query_result = 600;  /* CUDA_ERROR_NOT_READY: the spin still runs */

int cuInit(unsigned f) { (void)f; return 0; }
int cuDeviceGetCount(int* n) { *n = 1; return 0; }
int cuDeviceGet(int* d, int o) { *d = o; return 0; }
int cuDeviceGetAttribute(int* v, int a, int d) {
  (void)d; *v = a == 75 ? 9 : a == 38 ? 50 * 1024 * 1024 : a == 16 ? 132 : 0; return 0; }
int cuDevicePrimaryCtxRetain(void** c, int d) { (void)d; *c = (void*)0x1234; return 0; }
static void* cur;
int cuCtxGetCurrent(void** c) { *c = cur; return 0; }
int cuCtxSetCurrent(void* c) { cur = c; return 0; }
int cuCtxSynchronize(void) { return 0; }
int cuStreamSynchronize(void* s) { (void)s; return 0; }
int cuModuleLoadData(void** m, const void* img) { *m = (void*)img; return 0; }
int cuModuleUnload(void* m) { (void)m; return 0; }
int cuModuleGetFunction(void** f, void* m, const char* name) {
  (void)m; if (strcmp(name, "missing") == 0) return 500; /* CUDA_ERROR_NOT_FOUND */
  *f = (void*)name; return 0; }
int cuFuncSetAttribute(void* f, int a, int v) { (void)f; (void)a; (void)v; return 0; }
int cuFuncGetAttribute(int* v, int a, void* f) { (void)a; (void)f; *v = 32; return 0; }
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shmem, void* stream, void** params, void** extra) {
  (void)stream; (void)extra;
  if (strcmp((const char*)f, "gpudsl_spin") == 0) { ++nspin; return 0; }  /* takes no fake time */
  unsigned cfg[7] = {gx, gy, gz, bx, by, bz, shmem};
  memcpy(last_cfg, cfg, sizeof cfg);
  for (int i = 0; i < 3; ++i) memcpy(&last[i], params[i], 8);  /* the test kernel has 3 */
  /* the test kernel "scale": float* x, int n, float a  -> x[i] *= a on the host */
  float* x = *(float**)params[0]; int n = *(int*)params[1]; float a = *(float*)params[2];
  for (int i = 0; i < n; ++i) x[i] *= a;
  ++nlaunch;
  fake_ms += 1.0;  /* every launch "takes" 1 ms on the fake clock */
  return 0;
}
int cuMemAlloc_v2(uint64_t* p, size_t n) { *p = (uint64_t)(uintptr_t)malloc(n); return 0; }
int cuMemFree_v2(uint64_t p) { free((void*)(uintptr_t)p); return 0; }
int cuMemcpyHtoD_v2(uint64_t d, const void* s, size_t n) { memcpy((void*)(uintptr_t)d, s, n); fake_ms += 1000.0; return 0; }
int cuMemcpyDtoH_v2(void* d, uint64_t s, size_t n) { memcpy(d, (void*)(uintptr_t)s, n); return 0; }
int cuMemcpyDtoD_v2(uint64_t d, uint64_t s, size_t n) { memcpy((void*)(uintptr_t)d, (void*)(uintptr_t)s, n); return 0; }
int cuMemsetD8_v2(uint64_t d, unsigned char v, size_t n) {
  memset((void*)(uintptr_t)d, v, n); ++nmemset; last_memset = n; fake_ms += 100.0; return 0; }
int cuGetErrorName(int e, const char** s) { *s = e == 500 ? "CUDA_ERROR_NOT_FOUND" : "CUDA_ERROR_UNKNOWN"; return 0; }
int cuGetErrorString(int e, const char** s) { (void)e; *s = "named symbol not found"; return 0; }
int fake_last(uint64_t* vals, unsigned* cfg) { memcpy(vals, last, sizeof last); memcpy(cfg, last_cfg, sizeof last_cfg); return nlaunch; }
/* events on the fake clock: launches add 1 ms, memsets 100 ms, host-to-device copies 1 s */
int cuEventCreate(void** e, unsigned f) { (void)f; *e = calloc(1, sizeof(double)); return 0; }
int cuEventRecord(void* e, void* s) { (void)s; *(double*)e = fake_ms; return 0; }
int cuEventSynchronize(void* e) { (void)e; return 0; }
int cuEventElapsedTime(float* ms, void* a, void* b) { *ms = (float)(*(double*)b - *(double*)a); return 0; }
int cuEventDestroy_v2(void* e) { free(e); return 0; }
int cuDeviceGetName(char* name, int len, int d) { (void)d; strncpy(name, "Fake H100", len); return 0; }
int cuDriverGetVersion(int* v) { *v = 13000; return 0; }
int fake_memsets(size_t* n) { *n = last_memset; return nmemset; }
int cuEventQuery(void* e) { (void)e; return event_query_result; }
int fake_spins(void) { return nspin; }
void fake_set_event_query(int r) { event_query_result = r; }
