/* A small fake libnvidia-ml.so.1 for slurmkit's tests, used through the REAL pynvml.
 *
 * Written for slurmkit (no NVIDIA code). Only the functions slurmkit's live source calls are
 * exported; pynvml looks symbols up lazily, so anything else reads as FUNCTION_NOT_FOUND.
 *
 * Environment (read at every call, so one library serves every test):
 *   SLURMKIT_FAKE_NVML        healthy (default) | not_supported | gpu_is_lost | hang_init |
 *                             hang_memory | hang_set (every action hangs) | stuck_memory |
 *                             no_permission
 *   SLURMKIT_FAKE_NVML_STUCK  stuck_memory mode: the program the memory-info call turns the
 *                             calling process into (exec, same pid), standing for a call stuck in
 *                             the driver; without it the call hangs like hang_memory
 *   SLURMKIT_FAKE_NVML_GPUS   number of GPUs (default 4, at most 8)
 *   SLURMKIT_FAKE_NVML_LOST   NVML index of the lost GPU in gpu_is_lost mode (default 1)
 *   SLURMKIT_FAKE_NVML_MINORS comma list of minor numbers in NVML order (default reversed: N-1..0)
 *   SLURMKIT_FAKE_NVML_PROCS  compute processes "gpu:pid:MiB,..." (default none)
 *   SLURMKIT_FAKE_NVML_CLOCK_REASONS  clock event reasons bitmask for every GPU (default 0x1 idle)
 *   SLURMKIT_FAKE_NVML_ENERGY_MJ      total energy counter base in mJ (GPU i adds i*1000)
 *   SLURMKIT_FAKE_NVML_ACCOUNTING  accounting records "gpu:pid:gpu%:mem%:maxMiB:time_ms,..." (also
 *                             turns accounting mode on for those GPUs)
 *   SLURMKIT_FAKE_NVML_LOG    file that actions (resets, set clocks / locked clocks / power limit,
 *                             accounting) append to, one "what index value [value]" line each
 *   SLURMKIT_FAKE_NVML_SET_FAIL  actions refused: "what:rc[:gpu],..." (what as in the log, e.g.
 *                             set_locked_clocks:4 = NO_PERMISSION on every GPU, set_power_limit:3:1 =
 *                             NOT_SUPPORTED on NVML GPU1); a refused action is not logged
 *   SLURMKIT_FAKE_NVML_MIG    MIG devices "gpu:gi:slices:memMB[:ci_slices],..." (GPU instance id, its compute
 *                             slices and memory; one compute instance each, id 0): those GPUs are in
 *                             MIG mode (current and pending) and give these MIG device handles
 *   SLURMKIT_FAKE_NVML_RECOVERY  field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: "gpu:action,..." (the
 *                             nvmlDeviceGpuRecoveryAction_t number; others 0 = NONE), or "old" (a
 *                             driver that predates the field: per-field INVALID_ARGUMENT), or
 *                             "unsupported" (per-field NOT_SUPPORTED)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef struct fake_dev { int index; int mig; } *nvmlDevice_t;  /* mig: 0, or MIG device k+1 */

#define OK 0
#define E_UNINIT 1
#define E_INVALID 2
#define E_NOT_SUPPORTED 3
#define E_NO_PERMISSION 4
#define E_INSUFFICIENT 7
#define E_GPU_LOST 15

static struct fake_dev devs[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static const int buses[8] = {0x19, 0x3b, 0x4c, 0x5d, 0x9b, 0xbb, 0xcb, 0xdb};
static int initialised = 0;
static unsigned int power_limit_mw[8] = {700000, 700000, 700000, 700000, 700000, 700000, 700000, 700000};
static int accounting[8];

static const char *mode(void) { const char *m = getenv("SLURMKIT_FAKE_NVML"); return m ? m : "healthy"; }
static int is(const char *m) { return strcmp(mode(), m) == 0; }
static int ngpus(void) {
    const char *s = getenv("SLURMKIT_FAKE_NVML_GPUS");
    int n = s ? atoi(s) : 4;
    return n < 0 ? 0 : (n > 8 ? 8 : n);
}
static int lost_index(void) { const char *s = getenv("SLURMKIT_FAKE_NVML_LOST"); return s ? atoi(s) : 1; }
static void act_log(const char *what, int index, long value) {
    const char *path = getenv("SLURMKIT_FAKE_NVML_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s %d %ld\n", what, index, value);
    fclose(f);
}
static void act_log2(const char *what, int index, long a, long b) {
    const char *path = getenv("SLURMKIT_FAKE_NVML_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s %d %ld %ld\n", what, index, a, b);
    fclose(f);
}
/* The return code SLURMKIT_FAKE_NVML_SET_FAIL gives action `what` on GPU `index` (OK: none). */
static nvmlReturn_t set_fail(const char *what, int index) {
    const char *s = getenv("SLURMKIT_FAKE_NVML_SET_FAIL");
    size_t n = strlen(what);
    while (s && *s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        if (len > n && strncmp(s, what, n) == 0 && s[n] == ':') {
            int rc = 0, gpu = -1;
            int got = sscanf(s + n + 1, "%d:%d", &rc, &gpu);
            if (got >= 1 && (got < 2 || gpu == index)) return rc;
        }
        s = end ? end + 1 : NULL;
    }
    return OK;
}
#define FAIL(what, d) do { if (is("hang_set")) for (;;) pause(); \
                               nvmlReturn_t _r = set_fail((what), (d)->index); if (_r) return _r; } while (0)
/* Common guard for a device query: initialised, valid handle, not lost, supported. */
static nvmlReturn_t guard(nvmlDevice_t d, int identity) {
    if (!initialised) return E_UNINIT;
    if (!d || d->index < 0 || d->index >= ngpus()) return E_INVALID;
    if (is("gpu_is_lost") && d->index == lost_index()) return E_GPU_LOST;
    if (!identity && is("not_supported")) return E_NOT_SUPPORTED;
    return OK;
}
#define GUARD(d) do { nvmlReturn_t _r = guard((d), 0); if (_r) return _r; } while (0)
#define GUARD_ID(d) do { nvmlReturn_t _r = guard((d), 1); if (_r) return _r; } while (0)

static nvmlReturn_t do_init(void) {
    if (is("hang_init")) for (;;) pause();
    if (is("no_permission")) return E_NO_PERMISSION;
    initialised = 1;
    return OK;
}
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(); }
nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
nvmlReturn_t nvmlShutdown(void) { if (!initialised) return E_UNINIT; initialised = 0; return OK; }

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case OK: return "Success";
    case E_UNINIT: return "Uninitialized";
    case E_INVALID: return "Invalid Argument";
    case E_NOT_SUPPORTED: return "Not Supported";
    case E_NO_PERMISSION: return "Insufficient Permissions";
    case E_INSUFFICIENT: return "Insufficient Size";
    case E_GPU_LOST: return "GPU is lost";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned int len) {
    if (!initialised) return E_UNINIT;
    snprintf(buf, len, "535.161.08");
    return OK;
}
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    if (!initialised) return E_UNINIT;
    *n = (unsigned int)ngpus();
    return OK;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *out) {
    if (!initialised) return E_UNINIT;
    if ((int)i >= ngpus()) return E_INVALID;
    if (is("gpu_is_lost") && (int)i == lost_index()) return E_GPU_LOST;
    *out = &devs[i];
    return OK;
}
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len) {
    GUARD_ID(d); snprintf(buf, len, "NVIDIA H100 80GB HBM3"); return OK;
}
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len) {
    GUARD_ID(d);
    if (d->mig) snprintf(buf, len, "MIG-fa4e5e00-0000-4000-8000-%06d%06d", d->index, d->mig - 1);
    else snprintf(buf, len, "GPU-fa4e5e00-0000-4000-8000-%012d", d->index);
    return OK;
}
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *buf, unsigned int len) {
    GUARD_ID(d); snprintf(buf, len, "16501240%05d", d->index); return OK;
}
nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) {
    GUARD_ID(d);
    const char *s = getenv("SLURMKIT_FAKE_NVML_MINORS");
    if (s) {
        int k = 0; const char *p = s;
        while (k < d->index && (p = strchr(p, ','))) { p++; k++; }
        if (!p) return E_INVALID;
        *minor = (unsigned int)atoi(p);
    } else {
        *minor = (unsigned int)(ngpus() - 1 - d->index);
    }
    return OK;
}
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
    GUARD_ID(d);
    memset(p, 0, sizeof *p);
    p->domain = 0; p->bus = (unsigned int)buses[d->index]; p->device = 0;
    p->pciDeviceId = 0x233010DE; p->pciSubSystemId = 0x16C110DE;
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", buses[d->index]);
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", buses[d->index]);
    return OK;
}
nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t d, char *buf, unsigned int len) {
    GUARD(d); snprintf(buf, len, "96.00.74.00.0D"); return OK;
}
nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t d) { GUARD(d); return OK; }
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *m) { GUARD(d); *m = 1; return OK; }
typedef struct {
    unsigned int gpuUtilization, memoryUtilization;
    unsigned long long maxMemoryUsage, time, startTime;
    unsigned int isRunning, reserved[5];
} nvmlAccountingStats_t;
/* Accounting record k of GPU `index` from SLURMKIT_FAKE_NVML_ACCOUNTING; returns the count. */
static int acct_of(int index, int want_k, unsigned int *pid, nvmlAccountingStats_t *st) {
    const char *s = getenv("SLURMKIT_FAKE_NVML_ACCOUNTING");
    int n = 0;
    while (s && *s) {
        int gpu, p, gu, mu, mib, ms, used = 0;
        if (sscanf(s, "%d:%d:%d:%d:%d:%d%n", &gpu, &p, &gu, &mu, &mib, &ms, &used) != 6) break;
        if (gpu == index) {
            if (n == want_k) {
                if (pid) *pid = (unsigned)p;
                if (st) {
                    memset(st, 0, sizeof *st);
                    st->gpuUtilization = (unsigned)gu; st->memoryUtilization = (unsigned)mu;
                    st->maxMemoryUsage = (unsigned long long)mib << 20; st->time = (unsigned long long)ms;
                    st->startTime = 1700000000000000ULL; st->isRunning = 0;
                }
            }
            n++;
        }
        s += used;
        if (*s == ',') s++;
    }
    return n;
}
nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t d, int *m) {
    GUARD(d); *m = accounting[d->index] || acct_of(d->index, -1, NULL, NULL) > 0; return OK;
}
nvmlReturn_t nvmlDeviceGetAccountingBufferSize(nvmlDevice_t d, unsigned int *n) { GUARD(d); *n = 4000; return OK; }
nvmlReturn_t nvmlDeviceGetAccountingPids(nvmlDevice_t d, unsigned int *count, unsigned int *pids) {
    GUARD(d);
    int n = acct_of(d->index, -1, NULL, NULL);
    if (*count < (unsigned)n) { *count = (unsigned)n; return E_INSUFFICIENT; }
    for (int k = 0; k < n; k++) acct_of(d->index, k, &pids[k], NULL);
    *count = (unsigned)n;
    return OK;
}
nvmlReturn_t nvmlDeviceGetAccountingStats(nvmlDevice_t d, unsigned int pid, nvmlAccountingStats_t *st) {
    GUARD(d);
    int n = acct_of(d->index, -1, NULL, NULL);
    for (int k = 0; k < n; k++) {
        unsigned int p = 0;
        acct_of(d->index, k, &p, NULL);
        if (p == pid) { acct_of(d->index, k, NULL, st); return OK; }
    }
    return 6; /* NVML_ERROR_NOT_FOUND */
}
/* The k-th MIG device SLURMKIT_FAKE_NVML_MIG gives GPU `index` (k < 0: count them). */
static int mig_of(int index, int want_k, int *gi, int *slices, long *mem, int *ci_slices) {
    const char *s = getenv("SLURMKIT_FAKE_NVML_MIG");
    int n = 0;
    while (s && *s) {
        int gpu, g, sl, used = 0, cs = -1;
        long mb;
        if (sscanf(s, "%d:%d:%d:%ld%n", &gpu, &g, &sl, &mb, &used) != 4) break;
        s += used;
        if (*s == ':') { int more = 0; if (sscanf(s, ":%d%n", &cs, &more) == 1) s += more; }
        if (gpu == index) {
            if (n == want_k) { *gi = g; *slices = sl; *mem = mb; *ci_slices = cs < 0 ? sl : cs; }
            n++;
        }
        if (*s == ',') s++;
    }
    return n;
}
static struct fake_dev migdevs[8][7];
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend) {
    int gi, sl, cs; long mb;
    GUARD(d); *cur = *pend = mig_of(d->index, -1, &gi, &sl, &mb, &cs) > 0; return OK;
}
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *n) { GUARD(d); *n = 7; return OK; }
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int k, nvmlDevice_t *out) {
    int gi, sl, cs; long mb;
    GUARD(d);
    if (k >= 7) return E_INVALID;
    if ((int)k >= mig_of(d->index, -1, &gi, &sl, &mb, &cs)) return 6; /* NVML_ERROR_NOT_FOUND */
    migdevs[d->index][k].index = d->index; migdevs[d->index][k].mig = (int)k + 1;
    *out = &migdevs[d->index][k];
    return OK;
}
static int mig_attr(nvmlDevice_t d, int *gi, int *sl, long *mb, int *cs) {
    if (!d || !d->mig) return 0;
    return mig_of(d->index, d->mig - 1, gi, sl, mb, cs) > d->mig - 1;
}
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id) {
    int gi, sl, cs; long mb;
    GUARD_ID(d); if (!mig_attr(d, &gi, &sl, &mb, &cs)) return E_INVALID; *id = (unsigned)gi; return OK;
}
nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id) {
    int gi, sl, cs; long mb;
    GUARD_ID(d); if (!mig_attr(d, &gi, &sl, &mb, &cs)) return E_INVALID; *id = 0; return OK;
}
typedef struct {
    unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount,
                 sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t d, nvmlDeviceAttributes_t *a) {
    int gi, sl, cs; long mb;
    GUARD_ID(d); if (!mig_attr(d, &gi, &sl, &mb, &cs)) return E_INVALID;
    memset(a, 0, sizeof *a);
    a->multiprocessorCount = 16u * (unsigned)cs; a->sharedCopyEngineCount = (unsigned)sl;
    a->gpuInstanceSliceCount = (unsigned)sl; a->computeInstanceSliceCount = (unsigned)cs;
    a->memorySizeMB = (unsigned long long)mb;
    return OK;
}
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t d, int *cur, int *pend) { GUARD(d); *cur = 1; *pend = 1; return OK; }
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long *n) {
    GUARD(d); (void)type; (void)counter; *n = 0; return OK;
}
nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t d, int type, int counter, int loc, unsigned long long *n) {
    GUARD(d); (void)type; (void)counter; (void)loc; *n = 0; return OK;
}
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t d, int cause, unsigned int *count, unsigned long long *addrs) {
    GUARD(d); (void)cause; (void)addrs; *count = 0; return OK;
}
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t d, int *pending) { GUARD(d); *pending = 0; return OK; }
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
    GUARD(d); *corr = 0; *unc = 0; *pending = 0; *failure = 0; return OK;
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t d, unsigned long long *r) {
    GUARD(d);
    const char *s = getenv("SLURMKIT_FAKE_NVML_CLOCK_REASONS");
    *r = s ? strtoull(s, NULL, 0) : 0x1ULL;
    return OK;
}
nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t d, int type, unsigned int *mhz) {
    GUARD(d); *mhz = type == 2 ? 2619 : 1980; return OK;
}
nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t d, int type, unsigned int *mhz) {
    GUARD(d); *mhz = type == 2 ? 2619 : 1980; return OK;
}
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *mw) { GUARD(d); *mw = power_limit_mw[d->index]; return OK; }
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t d, unsigned int *mw) { GUARD(d); *mw = 700000; return OK; }
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) { GUARD(d); *mw = 67000 + 1000 * (unsigned)d->index; return OK; }
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *c) {
    GUARD(d); if (sensor != 0) return E_INVALID; *c = 30 + (unsigned)d->index; return OK;
}
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t d, int which, unsigned int *c) {
    GUARD(d); *c = which == 1 ? 87 : 92; return OK;   /* 1 = SLOWDOWN, else SHUTDOWN-ish */
}
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) { GUARD(d); u->gpu = 0; u->memory = 0; return OK; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { GUARD(d); *v = 5; return OK; }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { GUARD(d); *v = 5; return OK; }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { GUARD(d); *v = 16; return OK; }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { GUARD(d); *v = 16; return OK; }
nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t d, unsigned long long *m) { GUARD(d); *m = 0; return OK; }
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, unsigned int *active) {
    GUARD(d); if (link >= 18) return E_INVALID; *active = 1; return OK;
}
typedef struct { unsigned char clusterUuid[16]; int status; unsigned int cliqueId; unsigned char state; } nvmlGpuFabricInfo_t;
nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t d, nvmlGpuFabricInfo_t *f) {
    GUARD(d); memset(f, 0, sizeof *f); f->status = OK; f->cliqueId = 1; f->state = 3; return OK;
}
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_t;

/* Parse SLURMKIT_FAKE_NVML_PROCS for GPU `index`: fills up to `max` entries, returns the count. */
static int procs_of(int index, nvmlProcessInfo_t *out, int max) {
    const char *s = getenv("SLURMKIT_FAKE_NVML_PROCS");
    int n = 0;
    while (s && *s) {
        int gpu, pid, mib, used = 0;
        if (sscanf(s, "%d:%d:%d%n", &gpu, &pid, &mib, &used) != 3) break;
        if (gpu == index) {
            if (out && n < max) {
                out[n].pid = (unsigned)pid; out[n].usedGpuMemory = (unsigned long long)mib << 20;
                out[n].gpuInstanceId = 0xFFFFFFFF; out[n].computeInstanceId = 0xFFFFFFFF;
            }
            n++;
        }
        s += used;
        if (*s == ',') s++;
    }
    return n;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    GUARD(d);
    if (is("hang_memory")) for (;;) pause();
    if (is("stuck_memory")) {
        const char *stuck = getenv("SLURMKIT_FAKE_NVML_STUCK");
        if (stuck) execl(stuck, stuck, (char *)NULL);
        for (;;) pause();
    }
    nvmlProcessInfo_t p[16];
    int n = procs_of(d->index, p, 16);
    unsigned long long used = 0;
    for (int i = 0; i < n && i < 16; i++) used += p[i].usedGpuMemory;
    m->total = 81559ULL << 20; m->reserved = 551ULL << 20; m->used = used;
    m->free = m->total - m->reserved - m->used;
    return OK;
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    GUARD(d);
    int n = procs_of(d->index, NULL, 0);
    if (n == 0) { *count = 0; return OK; }
    if (!infos || *count < (unsigned)n) { *count = (unsigned)n; return E_INSUFFICIENT; }
    *count = (unsigned)procs_of(d->index, infos, (int)*count);
    return OK;
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t d, unsigned long long *mj) {
    GUARD(d);
    const char *s = getenv("SLURMKIT_FAKE_NVML_ENERGY_MJ");
    *mj = (s ? strtoull(s, NULL, 0) : 123456789ULL) + 1000ULL * (unsigned)d->index;
    return OK;
}
/* nvmlFieldValue_t as nvml.h lays it out: the call succeeds, each field carries its own return */
typedef struct {
    unsigned int fieldId, scopeId; long long timestamp, latencyUsec;
    int valueType; int nvmlReturn; union { double d; unsigned int ui; unsigned long ul; unsigned long long ull;
                                           long long sll; int si; unsigned short us; } value;
} nvmlFieldValue_t;
#define FI_GPU_RECOVERY_ACTION 230
static unsigned int recovery_of(int index, int *rc) {
    const char *s = getenv("SLURMKIT_FAKE_NVML_RECOVERY");
    *rc = OK;
    if (s && strcmp(s, "old") == 0) { *rc = E_INVALID; return 0; }
    if (s && strcmp(s, "unsupported") == 0) { *rc = E_NOT_SUPPORTED; return 0; }
    while (s && *s) {
        int gpu, action, used = 0;
        if (sscanf(s, "%d:%d%n", &gpu, &action, &used) != 2) break;
        if (gpu == index) return (unsigned)action;
        s += used;
        if (*s == ',') s++;
    }
    return 0;
}
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int count, nvmlFieldValue_t *values) {
    GUARD(d);
    for (int i = 0; i < count; i++) {
        values[i].timestamp = 0; values[i].latencyUsec = 0;
        if (values[i].fieldId != FI_GPU_RECOVERY_ACTION) { values[i].nvmlReturn = E_NOT_SUPPORTED; continue; }
        int rc;
        unsigned int action = recovery_of(d->index, &rc);
        values[i].valueType = 1; /* NVML_VALUE_TYPE_UNSIGNED_INT */
        values[i].nvmlReturn = rc;
        values[i].value.ull = 0; values[i].value.ui = action;
    }
    return OK;
}
/* actions */
nvmlReturn_t nvmlDeviceResetApplicationsClocks(nvmlDevice_t d) {
    GUARD(d); FAIL("reset_app_clocks", d); act_log("reset_app_clocks", d->index, 0); return OK;
}
nvmlReturn_t nvmlDeviceResetGpuLockedClocks(nvmlDevice_t d) {
    GUARD(d); FAIL("reset_locked_clocks", d); act_log("reset_locked_clocks", d->index, 0); return OK;
}
nvmlReturn_t nvmlDeviceSetGpuLockedClocks(nvmlDevice_t d, unsigned int lo, unsigned int hi) {
    GUARD(d); FAIL("set_locked_clocks", d);
    if (lo > hi) return E_INVALID;
    act_log2("set_locked_clocks", d->index, (long)lo, (long)hi); return OK;
}
nvmlReturn_t nvmlDeviceResetMemoryLockedClocks(nvmlDevice_t d) {
    GUARD(d); FAIL("reset_mem_locked_clocks", d); act_log("reset_mem_locked_clocks", d->index, 0); return OK;
}
nvmlReturn_t nvmlDeviceSetMemoryLockedClocks(nvmlDevice_t d, unsigned int lo, unsigned int hi) {
    GUARD(d); FAIL("set_mem_locked_clocks", d);
    if (lo > hi) return E_INVALID;
    act_log2("set_mem_locked_clocks", d->index, (long)lo, (long)hi); return OK;
}
nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t d, unsigned int mem, unsigned int graphics) {
    GUARD(d); FAIL("set_app_clocks", d);
    act_log("set_app_clocks_mem", d->index, (long)mem); act_log("set_app_clocks_graphics", d->index, (long)graphics);
    return OK;
}
nvmlReturn_t nvmlDeviceSetPowerManagementLimit(nvmlDevice_t d, unsigned int mw) {
    GUARD(d); FAIL("set_power_limit", d);
    power_limit_mw[d->index] = mw; act_log("set_power_limit_mw", d->index, (long)mw); return OK;
}
nvmlReturn_t nvmlDeviceSetAccountingMode(nvmlDevice_t d, int mode) {
    GUARD(d); FAIL("set_accounting_mode", d);
    accounting[d->index] = mode; act_log("set_accounting_mode", d->index, mode); return OK;
}
