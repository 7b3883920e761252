/*
 * Test-only stand-in for libQnnHtp.so (see tests/delegates/qnn_fixtures.py).
 *
 * ExecuTorch 1.5.1 is compiled against QNN 2.37 headers, in which the HTP device
 * custom config (QnnHtpDevice_CustomConfig_t) keeps its union at byte 4. The QNN
 * 2.47/2.51 libraries of onnxruntime-qnn read that union at byte 8 (it gained a
 * pointer member), so they see ExecuTorch's SoC config as "socModel 0" and
 * deviceCreate fails with 14001, in ExecuTorch's exporter and in its runtime.
 *
 * This library forwards QnnInterface_getProviders to the real libQnnHtp.so and
 * hands out copies of its interface tables whose deviceCreate rewrites the
 * device configs: the SoC custom config is passed on with the SoC model written
 * at both byte 4 and byte 8 (either layout reads it), every other custom config
 * and the platform-info config are dropped (their layouts changed too, and the
 * SoC alone selects the HTP architecture and VTCM size). Nothing else changes.
 * pyruntime itself never needs it: its bridge writes the SoC config itself.
 *
 * Build (the fixtures do this):
 *   cc -shared -fPIC -O2 -o libQnnHtp.so qnn_htp_shim.c -ldl -lpthread \
 *      -Wl,-soname,libQnnHtp.so -Wl,-z,nodelete -DQNN_SHIM_REAL='"/abs/real/libQnnHtp.so"'
 * $PYRUNTIME_QNN_SHIM_REAL overrides the compiled-in path of the real library;
 * $PYRUNTIME_QNN_SHIM_NO_SOC=1 drops the SoC config too (device without config).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef QNN_SHIM_REAL
#define QNN_SHIM_REAL "libQnnHtp.so"
#endif

typedef uint64_t qnn_status;
typedef qnn_status (*get_providers_fn)(const void ***providers, uint32_t *count);
typedef qnn_status (*device_create_fn)(void *logger, const void **config, void **device);

/* QnnInterface_t on x86_64: u32 backendId, char *providerName, Qnn_ApiVersion_t
 * (six u32), then the function table at byte 40. deviceCreate is its 41st entry
 * (index 40) in core API 2.x, whose table only ever grows at the end. */
enum { TABLE_OFFSET = 40, DEVICE_CREATE_SLOT = 40 };
/* bytes copied per provider: the header and a table longer than any 2.x table */
enum { PROVIDER_BYTES = TABLE_OFFSET + 8 * 160, MAX_PROVIDERS = 8, MAX_CONFIGS = 16 };
enum { DEVICE_CONFIG_CUSTOM = 0, HTP_DEVICE_CONFIG_SOC = 0 };
#define QNN_COMMON_ERROR_GENERAL 1000u

/* QnnDevice_Config_t: u32 option, then a union whose first member is a pointer */
typedef struct {
  uint32_t option;
  const void *custom;
} device_config;

/* QnnHtpDevice_CustomConfig_t for the SoC option, readable in both layouts */
typedef struct {
  uint32_t option;
  uint32_t soc_at_4;
  uint32_t soc_at_8;
  uint32_t zero[9];
} htp_soc_config;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static qnn_status init_status = QNN_COMMON_ERROR_GENERAL;
static uint32_t n_providers;
static unsigned char copies[MAX_PROVIDERS][PROVIDER_BYTES] __attribute__((aligned(16)));
static const void *list[MAX_PROVIDERS];
static device_create_fn real_device_create[MAX_PROVIDERS];

static qnn_status create_device(int i, void *logger, const void **config, void **dev) {
  device_config configs[MAX_CONFIGS];
  htp_soc_config socs[MAX_CONFIGS];
  const void *kept[MAX_CONFIGS + 1];
  int n = 0;
  const char *no_soc = getenv("PYRUNTIME_QNN_SHIM_NO_SOC");
  int keep_soc = !(no_soc != NULL && no_soc[0] == '1');
  for (int k = 0; config != NULL && config[k] != NULL && n < MAX_CONFIGS; ++k) {
    const device_config *c = (const device_config *)config[k];
    if (c->option != DEVICE_CONFIG_CUSTOM || c->custom == NULL) continue;
    const uint32_t *w = (const uint32_t *)c->custom;
    if (w[0] != HTP_DEVICE_CONFIG_SOC || !keep_soc) continue;
    uint32_t soc = w[1] != 0 ? w[1] : w[2];
    memset(&socs[n], 0, sizeof socs[n]);
    socs[n].option = HTP_DEVICE_CONFIG_SOC;
    socs[n].soc_at_4 = socs[n].soc_at_8 = soc;
    configs[n].option = DEVICE_CONFIG_CUSTOM;
    configs[n].custom = &socs[n];
    kept[n] = &configs[n];
    ++n;
  }
  kept[n] = NULL;
  return real_device_create[i](logger, n ? kept : NULL, dev);
}

#define WRAPPER(i)                                                                    \
  static qnn_status device_create_##i(void *logger, const void **config, void **dev) { \
    return create_device(i, logger, config, dev);                                     \
  }
WRAPPER(0) WRAPPER(1) WRAPPER(2) WRAPPER(3) WRAPPER(4) WRAPPER(5) WRAPPER(6) WRAPPER(7)
static device_create_fn const wrappers[MAX_PROVIDERS] = {
    device_create_0, device_create_1, device_create_2, device_create_3,
    device_create_4, device_create_5, device_create_6, device_create_7};

static void init(void) {
  const char *path = getenv("PYRUNTIME_QNN_SHIM_REAL");
  if (path == NULL || path[0] == '\0') path = QNN_SHIM_REAL;
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "qnn_htp_shim: cannot load %s: %s\n", path, dlerror());
    return;
  }
  get_providers_fn get = (get_providers_fn)dlsym(lib, "QnnInterface_getProviders");
  if (get == NULL) {
    fprintf(stderr, "qnn_htp_shim: %s has no QnnInterface_getProviders\n", path);
    return;
  }
  const void **providers = NULL;
  uint32_t count = 0;
  qnn_status st = get(&providers, &count);
  if (st != 0) {
    init_status = st;
    return;
  }
  if (count > MAX_PROVIDERS) count = MAX_PROVIDERS;
  for (uint32_t i = 0; i < count; ++i) {
    memcpy(copies[i], providers[i], PROVIDER_BYTES);
    void **table = (void **)(copies[i] + TABLE_OFFSET);
    real_device_create[i] = (device_create_fn)table[DEVICE_CREATE_SLOT];
    if (real_device_create[i] != NULL) table[DEVICE_CREATE_SLOT] = (void *)wrappers[i];
    list[i] = copies[i];
  }
  n_providers = count;
  init_status = 0;
}

__attribute__((visibility("default"))) qnn_status
QnnInterface_getProviders(const void ***providers, uint32_t *count) {
  if (providers == NULL || count == NULL) return QNN_COMMON_ERROR_GENERAL;
  pthread_once(&once, init);
  if (init_status != 0) return init_status;
  *providers = list;
  *count = n_providers;
  return 0;
}
