/*
 * kafka_log_decoder._native: a fast, memory-safe walker over Kafka v2 record batches.
 *
 * Layouts follow apache/kafka (clients/src/main/java/org/apache/kafka/common/record/):
 *   DefaultRecordBatch.java  batch header, CRC-32C coverage, incrementSequence
 *   DefaultRecord.java       record framing (readFrom)
 *   ControlRecordType.java   control record key  (int16 version, int16 type)
 *   EndTransactionMarker.java  marker value     (int16 version, int32 coordinator epoch)
 *   ../utils/ByteUtils.java  zigzag varint / varlong
 * and the project's spec, /work/shared/spec/kafka-formats-and-rules.md section 1.
 *
 * Safety contract: every function here may be handed arbitrary bytes.  All reads are bounded by
 * lengths checked *before* the read, every length read from the data is read exactly once into
 * a local (so a bytearray mutated by another thread can produce wrong values but never an
 * out-of-bounds read), and all arithmetic on values taken from the data is done in a width where
 * it cannot overflow, or in unsigned arithmetic where Java's two's-complement wrap is wanted.
 * Bad data never raises; only bad Python arguments (and MemoryError) do.
 *
 * Output: columns are `bytes` objects of exactly n * width bytes in native byte order, filled in
 * place (grown with _PyBytes_Resize, i.e. realloc), so no per-batch Python object is created.
 * The GIL is released while walking large inputs; it is re-taken only to grow the columns.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define KRA_X86 1
#else
#define KRA_X86 0
#endif

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#endif

/* ------------------------------------------------------------------------------------------ */
/* Byte access.  memcpy-based loads are alignment- and aliasing-safe; gcc turns them (and the */
/* shift/or big-endian patterns) into single mov/movbe/bswap instructions.                    */
/* ------------------------------------------------------------------------------------------ */

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(((uint16_t)p[0] << 8) | p[1]); }

static inline uint32_t be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static inline uint64_t be64(const uint8_t *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32); }

/* Two's-complement reinterpretation (well defined for gcc, which documents modulo conversion). */
static inline int16_t as_i16(uint16_t v) { return (int16_t)v; }
static inline int32_t as_i32(uint32_t v) { return (int32_t)v; }
static inline int64_t as_i64(uint64_t v) { return (int64_t)v; }

/* ------------------------------------------------------------------------------------------ */
/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as Crc32C.compute in Kafka.          */
/* ------------------------------------------------------------------------------------------ */

#define CRC32C_POLY 0x82F63B78u

/* Slicing-by-8 tables: the portable fallback, and the source of the shift tables below. */
static uint32_t crc_tab[8][256];

/* Operators that advance a raw CRC register over CRC_LONG / CRC_SHORT zero bytes, one table
 * per register byte.  They let three independent streams be combined (Mark Adler's crc32c.c
 * scheme): crc(A || B) = shift_{|B|}(crc(A)) ^ crc_0(B) for the raw (un-inverted) register. */
#define CRC_LONG 8192
#define CRC_SHORT 256
static uint32_t crc_long_tab[4][256];
static uint32_t crc_short_tab[4][256];

static int have_hw_crc = 0; /* runtime: SSE4.2 present and not disabled by _set_crc_impl */
static int cpu_has_sse42 = 0;

static void crc_make_shift_table(uint32_t tab[4][256], size_t nbytes)
{
    /* The zero-byte advance is linear over GF(2): find the image of every register bit by
     * running the byte-wise update, then tabulate it per register byte. */
    uint32_t op[32];
    for (int bit = 0; bit < 32; bit++) {
        uint32_t r = 1u << bit;
        for (size_t j = 0; j < nbytes; j++)
            r = (r >> 8) ^ crc_tab[0][r & 0xff];
        op[bit] = r;
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int j = 0; j < 8; j++)
                if (b & (1u << j))
                    v ^= op[8 * k + j];
            tab[k][b] = v;
        }
}

static void crc_init_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_tab[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++)
        for (int k = 1; k < 8; k++)
            crc_tab[k][n] = (crc_tab[k - 1][n] >> 8) ^ crc_tab[0][crc_tab[k - 1][n] & 0xff];
    crc_make_shift_table(crc_long_tab, CRC_LONG);
    crc_make_shift_table(crc_short_tab, CRC_SHORT);
}

/* Portable slicing-by-8 on the raw register (no pre/post inversion). */
static uint32_t crc32c_sw_raw(uint32_t crc, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        uint64_t w = le64(p) ^ crc;
        crc = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^ crc_tab[5][(w >> 16) & 0xff] ^
              crc_tab[4][(w >> 24) & 0xff] ^ crc_tab[3][(w >> 32) & 0xff] ^ crc_tab[2][(w >> 40) & 0xff] ^
              crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if KRA_X86
static inline uint32_t crc_shift(const uint32_t tab[4][256], uint32_t crc)
{
    return tab[0][crc & 0xff] ^ tab[1][(crc >> 8) & 0xff] ^ tab[2][(crc >> 16) & 0xff] ^ tab[3][crc >> 24];
}

static inline uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8); /* the crc32 instruction consumes bytes in memory (little-endian) order */
    return v;
}

/* Hardware CRC-32C on the raw register.  The crc32 instruction has a latency of 3 cycles and a
 * throughput of 1/cycle, so long inputs are cut into three interleaved streams and combined. */
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw_raw(uint32_t crc, const uint8_t *p, size_t len)
{
    uint64_t c0 = crc;
    while (len >= 3 * CRC_LONG) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < CRC_LONG; i += 8) {
            c0 = _mm_crc32_u64(c0, ld64(p + i));
            c1 = _mm_crc32_u64(c1, ld64(p + CRC_LONG + i));
            c2 = _mm_crc32_u64(c2, ld64(p + 2 * CRC_LONG + i));
        }
        c0 = crc_shift(crc_long_tab, (uint32_t)c0) ^ c1;
        c0 = crc_shift(crc_long_tab, (uint32_t)c0) ^ c2;
        p += 3 * CRC_LONG;
        len -= 3 * CRC_LONG;
    }
    while (len >= 3 * CRC_SHORT) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < CRC_SHORT; i += 8) {
            c0 = _mm_crc32_u64(c0, ld64(p + i));
            c1 = _mm_crc32_u64(c1, ld64(p + CRC_SHORT + i));
            c2 = _mm_crc32_u64(c2, ld64(p + 2 * CRC_SHORT + i));
        }
        c0 = crc_shift(crc_short_tab, (uint32_t)c0) ^ c1;
        c0 = crc_shift(crc_short_tab, (uint32_t)c0) ^ c2;
        p += 3 * CRC_SHORT;
        len -= 3 * CRC_SHORT;
    }
    while (len >= 8) {
        c0 = _mm_crc32_u64(c0, ld64(p));
        p += 8;
        len -= 8;
    }
    uint32_t c = (uint32_t)c0;
    if (len >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c = _mm_crc32_u32(c, w);
        p += 4;
        len -= 4;
    }
    while (len--)
        c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

/* Standard chainable CRC-32C: crc32c(b, crc32c(a)) == crc32c(a + b). */
static inline uint32_t crc32c_update(uint32_t crc, const uint8_t *p, size_t len)
{
#if KRA_X86
    if (LIKELY(have_hw_crc))
        return ~crc32c_hw_raw(~crc, p, len);
#endif
    return ~crc32c_sw_raw(~crc, p, len);
}

/* ------------------------------------------------------------------------------------------ */
/* XXH64 (xxHash specification, seed 0 used for key/value hashes).                            */
/* ------------------------------------------------------------------------------------------ */

#define XXP1 0x9E3779B185EBCA87ULL
#define XXP2 0xC2B2AE3D27D4EB4FULL
#define XXP3 0x165667B19E3779F9ULL
#define XXP4 0x85EBCA77C2B2AE63ULL
#define XXP5 0x27D4EB2F165667C5ULL

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t xxh_round(uint64_t acc, uint64_t in)
{
    acc += in * XXP2;
    acc = rotl64(acc, 31);
    return acc * XXP1;
}

static inline uint64_t xxh_merge(uint64_t acc, uint64_t v)
{
    acc ^= xxh_round(0, v);
    return acc * XXP1 + XXP4;
}

static uint64_t xxh64(const uint8_t *p, size_t len, uint64_t seed)
{
    size_t rem = len;
    uint64_t h;
    if (rem >= 32) {
        uint64_t v1 = seed + XXP1 + XXP2, v2 = seed + XXP2, v3 = seed, v4 = seed - XXP1;
        do {
            v1 = xxh_round(v1, le64(p));
            v2 = xxh_round(v2, le64(p + 8));
            v3 = xxh_round(v3, le64(p + 16));
            v4 = xxh_round(v4, le64(p + 24));
            p += 32;
            rem -= 32;
        } while (rem >= 32);
        h = rotl64(v1, 1) + rotl64(v2, 7) + rotl64(v3, 12) + rotl64(v4, 18);
        h = xxh_merge(h, v1);
        h = xxh_merge(h, v2);
        h = xxh_merge(h, v3);
        h = xxh_merge(h, v4);
    } else {
        h = seed + XXP5;
    }
    h += (uint64_t)len;
    while (rem >= 8) {
        h ^= xxh_round(0, le64(p));
        h = rotl64(h, 27) * XXP1 + XXP4;
        p += 8;
        rem -= 8;
    }
    if (rem >= 4) {
        h ^= (uint64_t)le32(p) * XXP1;
        h = rotl64(h, 23) * XXP2 + XXP3;
        p += 4;
        rem -= 4;
    }
    while (rem) {
        h ^= (uint64_t)(*p) * XXP5;
        h = rotl64(h, 11) * XXP1;
        p++;
        rem--;
    }
    h ^= h >> 33;
    h *= XXP2;
    h ^= h >> 29;
    h *= XXP3;
    h ^= h >> 32;
    return h;
}

/* ------------------------------------------------------------------------------------------ */
/* Column sets: named, fixed-width columns backed by growable bytes objects.                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const char *name;
    char fmt; /* struct/memoryview format character, exported in *_COLUMNS */
    uint8_t width;
} ColDef;

enum {
    B_POSITION,
    B_BASE_OFFSET,
    B_LAST_OFFSET,
    B_SIZE_BYTES,
    B_PARTITION_LEADER_EPOCH,
    B_MAGIC,
    B_CRC,
    B_CRC_VALID,
    B_ATTRIBUTES,
    B_LAST_OFFSET_DELTA,
    B_BASE_TIMESTAMP,
    B_MAX_TIMESTAMP,
    B_PRODUCER_ID,
    B_PRODUCER_EPOCH,
    B_BASE_SEQUENCE,
    B_LAST_SEQUENCE,
    B_COUNT,
    B_CONTROL_TYPE,
    B_COORDINATOR_EPOCH,
    B_RECORDS_DECODED,
    B_ERR_OFFSET,
    B_NCOLS
};

static const ColDef batch_cols[B_NCOLS] = {
    {"position", 'q', 8},          {"base_offset", 'q', 8},
    {"last_offset", 'q', 8},       {"size_bytes", 'i', 4},
    {"partition_leader_epoch", 'i', 4}, {"magic", 'b', 1},
    {"crc", 'I', 4},               {"crc_valid", 'B', 1},
    {"attributes", 'h', 2},        {"last_offset_delta", 'i', 4},
    {"base_timestamp", 'q', 8},    {"max_timestamp", 'q', 8},
    {"producer_id", 'q', 8},       {"producer_epoch", 'h', 2},
    {"base_sequence", 'i', 4},     {"last_sequence", 'i', 4},
    {"count", 'i', 4},             {"control_type", 'h', 2},
    {"coordinator_epoch", 'i', 4}, {"records_decoded", 'B', 1},
    {"err_offset", 'i', 4},
};

enum {
    R_BATCH_INDEX,
    R_OFFSET,
    R_TIMESTAMP,
    R_SEQUENCE,
    R_KEY_POS,
    R_KEY_LEN,
    R_VALUE_POS,
    R_VALUE_LEN,
    R_HEADERS_COUNT,
    R_KEY_HASH,
    R_VALUE_HASH,
    R_NCOLS
};

static const ColDef record_cols[R_NCOLS] = {
    {"batch_index", 'i', 4}, {"offset", 'q', 8},    {"timestamp", 'q', 8},     {"sequence", 'i', 4},
    {"key_pos", 'q', 8},     {"key_len", 'i', 4},   {"value_pos", 'q', 8},     {"value_len", 'i', 4},
    {"headers_count", 'i', 4}, {"key_hash", 'Q', 8}, {"value_hash", 'Q', 8},
};

enum { H_RECORD_INDEX, H_KEY_POS, H_KEY_LEN, H_VALUE_POS, H_VALUE_LEN, H_NCOLS };

static const ColDef header_cols[H_NCOLS] = {
    {"hdr_record_index", 'i', 4}, {"hdr_key_pos", 'q', 8},   {"hdr_key_len", 'i', 4},
    {"hdr_value_pos", 'q', 8},    {"hdr_value_len", 'i', 4},
};

#define MAX_COLS B_NCOLS

typedef struct {
    const ColDef *defs;
    int ncols;
    PyObject *obj[MAX_COLS];
    char *ptr[MAX_COLS];
    Py_ssize_t n;     /* rows written */
    Py_ssize_t cap;   /* rows allocated */
} ColSet;

/* Holds the thread state while the GIL is released (NULL while it is held). */
typedef struct {
    PyThreadState *ts;
} Gil;

/* Large columns are written once, front to back, right after allocation, so their cost is
 * dominated by first-touch page faults.  Ask for transparent huge pages on them (as numpy does
 * for arrays >= 4 MB); this is only advice, harmless where THP is off.  Measured with
 * bench/native_microbench.py (THP "madvise" mode): one call decoding 500 MB of records went from
 * ~1.6 to ~2.5 GB/s.  Build with -DKRA_NO_HUGE_ADVICE to compare. */
#define HUGE_ADVICE_BYTES (4u << 20)
static void advise_huge(PyObject *bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE) && !defined(KRA_NO_HUGE_ADVICE)
    Py_ssize_t size = PyBytes_GET_SIZE(bytes);
    if ((size_t)size < HUGE_ADVICE_BYTES)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)PyBytes_AS_STRING(bytes), hi = lo + (uintptr_t)size;
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
    (void)bytes;
#endif
}

static int colset_init(ColSet *cs, const ColDef *defs, int ncols, Py_ssize_t cap)
{
    memset(cs, 0, sizeof(*cs));
    cs->defs = defs;
    cs->ncols = ncols;
    if (cap < 1) /* never allocate the shared empty-bytes singleton as a write target */
        cap = 1;
    for (int c = 0; c < ncols; c++) {
        cs->obj[c] = PyBytes_FromStringAndSize(NULL, cap * defs[c].width);
        if (!cs->obj[c])
            return -1;
        advise_huge(cs->obj[c]);
        cs->ptr[c] = PyBytes_AS_STRING(cs->obj[c]);
    }
    cs->cap = cap;
    return 0;
}

static void colset_free(ColSet *cs)
{
    for (int c = 0; c < cs->ncols; c++)
        Py_CLEAR(cs->obj[c]);
}

/* Make room for at least `need` rows, and for at most `most` where that holds `need` (0: no bound).
 * May be called with the GIL released (g->ts != NULL): it is re-taken around the reallocation.
 * Returns -1 with MemoryError set on failure. */
static int colset_grow(ColSet *cs, Py_ssize_t need, Py_ssize_t most, Gil *g)
{
    Py_ssize_t newcap = cs->cap > PY_SSIZE_T_MAX / 16 ? need : cs->cap * 2;
    if (newcap < need)
        newcap = need;
    if (most > 0 && newcap > most && need <= most)
        newcap = most;
    int rc = 0;
    if (g && g->ts)
        PyEval_RestoreThread(g->ts);
    if (newcap > PY_SSIZE_T_MAX / 8) {
        PyErr_NoMemory();
        rc = -1;
    } else {
        for (int c = 0; c < cs->ncols; c++) {
            if (_PyBytes_Resize(&cs->obj[c], newcap * cs->defs[c].width) < 0) {
                rc = -1; /* obj[c] is now NULL; colset_free copes */
                break;
            }
            advise_huge(cs->obj[c]);
            cs->ptr[c] = PyBytes_AS_STRING(cs->obj[c]);
        }
        if (rc == 0)
            cs->cap = newcap;
    }
    if (g && g->ts)
        g->ts = PyEval_SaveThread();
    return rc;
}

static inline int colset_reserve(ColSet *cs, Py_ssize_t need, Gil *g)
{
    return LIKELY(need <= cs->cap) ? 0 : colset_grow(cs, need, 0, g);
}

static inline int colset_reserve_upto(ColSet *cs, Py_ssize_t need, Py_ssize_t most, Gil *g)
{
    return LIKELY(need <= cs->cap) ? 0 : colset_grow(cs, need, most, g);
}

/* Trim every column to n rows and move it into `dict`.  GIL held.  Empties the set. */
static int colset_finish(ColSet *cs, PyObject *dict)
{
    for (int c = 0; c < cs->ncols; c++) {
        if (_PyBytes_Resize(&cs->obj[c], cs->n * cs->defs[c].width) < 0)
            return -1;
        int rc = PyDict_SetItemString(dict, cs->defs[c].name, cs->obj[c]);
        Py_CLEAR(cs->obj[c]);
        if (rc < 0)
            return -1;
    }
    return 0;
}

static inline void STORE32(char *col, Py_ssize_t i, uint32_t v) { memcpy(col + (size_t)i * 4, &v, 4); }
static inline void STORE64(char *col, Py_ssize_t i, uint64_t v) { memcpy(col + (size_t)i * 8, &v, 8); }

#define PUT8(cs, col, i, v)                                                                      \
    do {                                                                                         \
        uint8_t v_ = (uint8_t)(v);                                                               \
        memcpy((cs)->ptr[col] + (size_t)(i), &v_, 1);                                            \
    } while (0)
#define PUT16(cs, col, i, v)                                                                     \
    do {                                                                                         \
        int16_t v_ = (int16_t)(v);                                                               \
        memcpy((cs)->ptr[col] + (size_t)(i) * 2, &v_, 2);                                        \
    } while (0)
#define PUT32(cs, col, i, v)                                                                     \
    do {                                                                                         \
        uint32_t v_ = (uint32_t)(v);                                                             \
        memcpy((cs)->ptr[col] + (size_t)(i) * 4, &v_, 4);                                        \
    } while (0)
#define PUT64(cs, col, i, v)                                                                     \
    do {                                                                                         \
        uint64_t v_ = (uint64_t)(v);                                                             \
        memcpy((cs)->ptr[col] + (size_t)(i) * 8, &v_, 8);                                        \
    } while (0)

/* ------------------------------------------------------------------------------------------ */
/* Varints (ByteUtils.readUnsignedVarint / readUnsignedVarlong + zigzag).                     */
/* ------------------------------------------------------------------------------------------ */

/* At most 5 bytes; a continuation bit on the 5th byte is an error ("Varint is too long"), and
 * bits of the 5th byte beyond bit 31 are dropped, as Java's int shift does.  Returns 0 on
 * error or when the varint runs past `end`. */
static inline int read_varint(const uint8_t **pp, const uint8_t *end, int32_t *out)
{
    const uint8_t *p = *pp;
    uint32_t v;
    if (LIKELY(p < end && p[0] < 0x80)) {
        v = p[0];
        p++;
    } else {
        v = 0;
        for (int shift = 0;; shift += 7) {
            if (p >= end)
                return 0;
            uint32_t b = *p++;
            if (shift == 28) {
                if (b & 0x80)
                    return 0;
                v |= b << 28;
                break;
            }
            v |= (b & 0x7f) << shift;
            if (!(b & 0x80))
                break;
        }
    }
    *out = as_i32((v >> 1) ^ (0u - (v & 1)));
    *pp = p;
    return 1;
}

/* At most 10 bytes (continuation bit on the 10th is an error); excess high bits are dropped. */
static inline int read_varlong(const uint8_t **pp, const uint8_t *end, int64_t *out)
{
    const uint8_t *p = *pp;
    uint64_t v;
    if (LIKELY(p < end && p[0] < 0x80)) {
        v = p[0];
        p++;
    } else {
        v = 0;
        for (int shift = 0;; shift += 7) {
            if (p >= end)
                return 0;
            uint64_t b = *p++;
            if (shift == 63) {
                if (b & 0x80)
                    return 0;
                v |= b << 63;
                break;
            }
            v |= (b & 0x7f) << shift;
            if (!(b & 0x80))
                break;
        }
    }
    *out = as_i64((v >> 1) ^ (0ull - (v & 1)));
    *pp = p;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Kafka arithmetic                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* DefaultRecordBatch.incrementSequence: wraps to 0 after Integer.MAX_VALUE.  Java's int arithmetic,
 * which wraps: `Integer.MAX_VALUE - increment` of a negative increment (a garbage offset delta)
 * overflows and takes the other branch, so it is done in uint32 and read back as int32. */
static inline int32_t increment_sequence(int32_t seq, int32_t inc)
{
    int32_t limit = as_i32(0x7FFFFFFFu - (uint32_t)inc);
    if (seq > limit)
        return as_i32((uint32_t)inc - (0x7FFFFFFFu - (uint32_t)seq) - 1u);
    return as_i32((uint32_t)seq + (uint32_t)inc);
}

/* ------------------------------------------------------------------------------------------ */
/* Record framing: ONE routine, shared by walk_batches, decode_records and the control-record */
/* key parse.                                                                                 */
/* ------------------------------------------------------------------------------------------ */

enum { REC_OK = 0, REC_BAD = 1, REC_HEADERS = 2, REC_NOMEM = -1 };

/* Header rows one batch may add: a header takes 2 bytes of payload and 28 bytes of columns, so a few
 * KB of zstd (or one large plain batch) could claim gigabytes of them.  As many rows as fit the
 * 256 MiB a batch's payload may decompress to (codecs.MAX_DECOMPRESSED_BYTES); a batch with more is
 * not decoded (REC_HEADERS), as one claiming more records than that is not (segment.MAX_BATCH_RECORDS). */
#define HEADER_ROW_BYTES 28
#define MAX_BATCH_HEADERS ((Py_ssize_t)(256 << 20) / HEADER_ROW_BYTES)

typedef struct {
    int64_t ts_delta;
    int32_t off_delta;
    const uint8_t *key; /* NULL for a null key */
    int32_t key_len;    /* -1 for a null key */
    const uint8_t *val;
    int32_t val_len;
    int32_t hcount;
} RecFields;

/* Parse one record at *pp (DefaultRecord.readFrom):
 *   Length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint | key | valueLength varint | value | headersCount varint |
 *   headers [keyLength varint >= 0 | key | valueLength varint (-1 null) | value]
 * Every field must lie within the Length bytes and exactly Length bytes must be consumed
 * (Java reads past the record into the batch but then fails "Invalid record size", so bounding
 * reads to the record gives the same verdict).  A negative key/value length is a null, as in
 * Java (`if (keySize >= 0)`); a negative header count or header key length is an error.
 * If `hc` is non-NULL, one header row per header is appended (the caller rolls back on error), up
 * to row `hlimit` (REC_HEADERS past it).
 */
static ALWAYS_INLINE int parse_record(const uint8_t **pp, const uint8_t *end, RecFields *f, ColSet *hc,
                        Py_ssize_t hlimit, const uint8_t *base, int32_t rec_row, Gil *g)
{
    const uint8_t *p = *pp;
    int32_t len;
    if (!read_varint(&p, end, &len) || len < 1 || len > end - p)
        return REC_BAD;
    const uint8_t *rend = p + len;
    p++; /* attributes: unused by Kafka (len >= 1 guarantees the byte is there) */
    if (!read_varlong(&p, rend, &f->ts_delta) || !read_varint(&p, rend, &f->off_delta))
        return REC_BAD;
    int32_t n;
    if (!read_varint(&p, rend, &n))
        return REC_BAD;
    if (n >= 0) {
        if (n > rend - p)
            return REC_BAD;
        f->key = p;
        f->key_len = n;
        p += n;
    } else {
        f->key = NULL;
        f->key_len = -1;
    }
    if (!read_varint(&p, rend, &n))
        return REC_BAD;
    if (n >= 0) {
        if (n > rend - p)
            return REC_BAD;
        f->val = p;
        f->val_len = n;
        p += n;
    } else {
        f->val = NULL;
        f->val_len = -1;
    }
    if (!read_varint(&p, rend, &f->hcount) || f->hcount < 0)
        return REC_BAD; /* "Found invalid number of record headers" */
    /* Each header takes >= 2 bytes, so this loop is bounded by len / 2 whatever hcount says. */
    for (int32_t h = 0; h < f->hcount; h++) {
        int32_t klen, vlen;
        if (!read_varint(&p, rend, &klen) || klen < 0 || klen > rend - p)
            return REC_BAD; /* "Invalid negative header key size" */
        const uint8_t *kp = p;
        p += klen;
        if (!read_varint(&p, rend, &vlen))
            return REC_BAD;
        const uint8_t *vp = NULL;
        if (vlen >= 0) {
            if (vlen > rend - p)
                return REC_BAD;
            vp = p;
            p += vlen;
        } else {
            vlen = -1;
        }
        if (hc) {
            if (UNLIKELY(hc->n >= hlimit))
                return REC_HEADERS;
            /* Doubling stops at the limit: the rows a refused batch took are all it may take. */
            if (colset_reserve_upto(hc, hc->n + 1, hlimit, g) < 0)
                return REC_NOMEM;
            Py_ssize_t i = hc->n++;
            PUT32(hc, H_RECORD_INDEX, i, rec_row);
            PUT64(hc, H_KEY_POS, i, kp - base);
            PUT32(hc, H_KEY_LEN, i, klen);
            PUT64(hc, H_VALUE_POS, i, vp ? vp - base : -1);
            PUT32(hc, H_VALUE_LEN, i, vlen);
        }
    }
    if (p != rend)
        return REC_BAD; /* "Invalid record size: expected to read N bytes in record payload" */
    *pp = p;
    return REC_OK;
}

typedef struct {
    const uint8_t *base; /* positions are reported as pointer - base */
    int64_t base_offset;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int log_append_time;
    int32_t base_sequence;
    int32_t batch_index;
    int hash_values; /* XXH64 of keys and values: opt-in, it is a fifth of a 500-record decode */
} BatchCtx;

/* Decode `count` records from [p, end) into record rows (rc) and header rows (hc).  After the
 * last record no byte may remain ("Incorrect declared batch size, records still remaining").
 * On REC_BAD, *err is the start of the record that failed (or of the trailing bytes), and the
 * rows hold exactly the records completely decoded before it.  A negative count is an error at
 * p ("Found invalid record count").  A count of 0 is no records, whatever bytes follow: Java's
 * DefaultRecordBatch.iterator() returns an empty iterator when count() == 0 and never reads them.
 * REC_HEADERS: as REC_BAD, at the record whose headers passed MAX_BATCH_HEADERS for the batch. */
static int decode_blob(const BatchCtx *c, const uint8_t *p, const uint8_t *end, int32_t count,
                       ColSet *rc, ColSet *hc, Gil *g, const uint8_t **err)
{
    if (count < 0) {
        *err = p;
        return REC_BAD;
    }
    if (count == 0)
        return REC_OK;
    /* Reserve up front.  A record is >= 7 bytes (Length, attributes and five 1-byte varints), so
     * at most `fit` records can frame: a garbage count cannot make us allocate beyond that, and
     * the in-loop reserve below only fires if another thread grows a shared bytearray. */
    Py_ssize_t fit = (end - p) / 7;
    if (colset_reserve(rc, rc->n + (count < fit ? count : fit), g) < 0)
        return REC_NOMEM;
    /* Local copies of the column pointers: stores through char * may alias anything reachable,
     * so reading rc->ptr[] in the loop would force a reload after every store. */
    char *col[R_NCOLS];
    memcpy(col, rc->ptr, sizeof(col));
    Py_ssize_t i = rc->n;
    Py_ssize_t hlimit = hc->n + MAX_BATCH_HEADERS;
    int st = REC_OK;
    for (int32_t k = 0; k < count; k++, i++) {
        if (UNLIKELY(i >= rc->cap)) {
            rc->n = i;
            if (colset_reserve(rc, i + 1, g) < 0) {
                st = REC_NOMEM;
                break;
            }
            memcpy(col, rc->ptr, sizeof(col));
        }
        const uint8_t *rs = p;
        Py_ssize_t hsave = hc->n;
        RecFields f;
        st = parse_record(&p, end, &f, hc, hlimit, c->base, (int32_t)i, g);
        if (UNLIKELY(st != REC_OK)) {
            hc->n = hsave;
            *err = rs;
            break;
        }
        int64_t ts = c->log_append_time ? c->max_timestamp
                                        : as_i64((uint64_t)c->base_timestamp + (uint64_t)f.ts_delta);
        int32_t seq = c->base_sequence >= 0 ? increment_sequence(c->base_sequence, f.off_delta) : -1;
        int64_t kpos = f.key ? (int64_t)(f.key - c->base) : -1;
        int64_t vpos = f.val ? (int64_t)(f.val - c->base) : -1;
        uint64_t kh = c->hash_values && f.key ? xxh64(f.key, (size_t)f.key_len, 0) : 0;
        uint64_t vh = c->hash_values && f.val ? xxh64(f.val, (size_t)f.val_len, 0) : 0;
        STORE32(col[R_BATCH_INDEX], i, c->batch_index);
        STORE64(col[R_OFFSET], i, (uint64_t)c->base_offset + (uint64_t)(int64_t)f.off_delta);
        STORE64(col[R_TIMESTAMP], i, ts);
        STORE32(col[R_SEQUENCE], i, seq);
        STORE64(col[R_KEY_POS], i, kpos);
        STORE32(col[R_KEY_LEN], i, f.key_len);
        STORE64(col[R_VALUE_POS], i, vpos);
        STORE32(col[R_VALUE_LEN], i, f.val_len);
        STORE32(col[R_HEADERS_COUNT], i, f.hcount);
        STORE64(col[R_KEY_HASH], i, kh);
        STORE64(col[R_VALUE_HASH], i, vh);
    }
    rc->n = i;
    if (st == REC_OK && p != end) {
        *err = p;
        st = REC_BAD;
    }
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Batch walk                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* DefaultRecordBatch.java offsets (see constants.py). */
#define LOG_OVERHEAD 12
#define HEADER_UP_TO_MAGIC 17
#define RECORDS_OFFSET 61
#define MIN_BATCH_LENGTH (RECORDS_OFFSET - LOG_OVERHEAD)
#define MAX_SANE_BATCH_LENGTH (1 << 30)

enum { REASON_REACHED_STOP = 0, REASON_NEED_MORE_DATA = 1, REASON_NOT_V2 = 2, REASON_BAD_LENGTH = 3, REASON_FULL = 4 };

/* Release the GIL only for inputs where the walk outweighs the switch (about a microsecond). */
#define GIL_RELEASE_BYTES (256 * 1024)

/* Control batch: the first record's key is ControlRecordType (int16 version, int16 type); a
 * key under 4 bytes or a negative version is invalid (ControlRecordType.parseTypeId).  Returns the
 * raw type if >= 0, else -1 (unknown).  For ABORT/COMMIT, the value is EndTransactionMarker (int16
 * version >= 0, int32 coordinatorEpoch, >= 6 bytes; a newer version is read as its v0 prefix, as
 * Kafka does); a marker whose value is not one is invalid (EndTransactionMarker.deserializeValue
 * throws): -1 too, never ABORT/COMMIT with a made-up coordinator epoch.  Python names the invalid
 * ones (segment._control_problem), found among the -1s. */
static void parse_control(const uint8_t *p, const uint8_t *end, int32_t count, int16_t *ctype, int32_t *cepoch)
{
    *ctype = -1;
    *cepoch = -1;
    if (count < 1)
        return;
    RecFields f;
    if (parse_record(&p, end, &f, NULL, 0, p, 0, NULL) != REC_OK)
        return;
    /* A batch's last record must end its bytes (RecordIterator.next: "records still remaining"):
     * with one record, the marker's own iterator refuses the batch. */
    if (count == 1 && p != end)
        return;
    if (!f.key || f.key_len < 4 || as_i16(be16(f.key)) < 0)
        return;
    int16_t type = as_i16(be16(f.key + 2));
    if (type < 0)
        return;
    if (type == 0 || type == 1) {
        if (!f.val || f.val_len < 6 || as_i16(be16(f.val)) < 0)
            return;
        *cepoch = as_i32(be32(f.val + 2));
    }
    *ctype = type;
}

/* The framing decision at `pos`, shared by the sizing pre-pass and the walk so both stop at
 * the same place.  Returns -1 if a whole batch of *size bytes starts at pos, else the reason.
 * Order (see walk_batches' doc): stop bound, 17 bytes visible, magic, length sanity, whole batch. */
static inline int batch_at(const uint8_t *buf, size_t len, size_t pos, size_t stop, size_t *size)
{
    if (pos >= stop)
        return REASON_REACHED_STOP;
    size_t avail = len - pos;
    if (avail < HEADER_UP_TO_MAGIC)
        return REASON_NEED_MORE_DATA;
    const uint8_t *p = buf + pos;
    if (p[16] != 2) /* legacy v0/v1 (different minimum lengths) is Python's job */
        return REASON_NOT_V2;
    int32_t blen = as_i32(be32(p + 8));
    if (blen < MIN_BATCH_LENGTH || blen > MAX_SANE_BATCH_LENGTH)
        return REASON_BAD_LENGTH;
    *size = (size_t)blen + LOG_OVERHEAD;
    if (*size > avail)
        return REASON_NEED_MORE_DATA;
    return -1;
}

static inline int decodable(int16_t attributes) { return (attributes & 0x07) == 0 && !(attributes & 0x20); }

/* A plain batch claiming more records than `max_records` (segment.MAX_BATCH_RECORDS, passed in; < 0:
 * no cap) is not decoded in place, as a compressed one over it is not decompressed: one plain batch
 * of 75 MiB holds 8 million empty records, whose columns took 1.7 GB. */
static inline int over_record_cap(int32_t count, Py_ssize_t max_records)
{
    return max_records >= 0 && (Py_ssize_t)count > max_records;
}

/* Sizing pre-pass: hops header to header (no CRC, no records) to get the exact number of
 * batches and the number of record rows to allocate up front, so that the columns are allocated
 * once at their final size instead of being grown (realloc) and page-faulted twice; it costs
 * far less than it saves (one call over 200 MB of 1-record batches: 1.3 -> 2.4 GB/s).  Garbage
 * counts must not make us reserve far more than the output, so the record reservation is capped
 * at one row per 16 bytes of decodable batches (real records are rarely smaller; if they are,
 * the columns simply grow). */
static void scan_sizes(const uint8_t *buf, size_t len, size_t start, size_t stop, Py_ssize_t max_batches,
                       Py_ssize_t max_records, Py_ssize_t *n_out, Py_ssize_t *rec_out)
{
    size_t pos = start, size = 0, dec_bytes = 0;
    Py_ssize_t n = 0, recs = 0;
    while (n < max_batches && batch_at(buf, len, pos, stop, &size) < 0) {
        const uint8_t *p = buf + pos;
        int32_t count = as_i32(be32(p + 57));
        if (decodable(as_i16(be16(p + 21))) && count > 0 && !over_record_cap(count, max_records)) {
            Py_ssize_t fit = (Py_ssize_t)size / 7; /* keeps the sum below len / 7: no overflow */
            recs += count < fit ? count : fit;
            dec_bytes += size;
        }
        n++;
        pos += size;
    }
    *n_out = n;
    *rec_out = recs < (Py_ssize_t)(dec_bytes / 16) ? recs : (Py_ssize_t)(dec_bytes / 16);
}

/* The walk itself; see walk_batches' docstring for the contract.  Returns -1 only with a
 * Python exception set (MemoryError). */
static int walk_core(const uint8_t *buf, size_t len, size_t start, size_t stop, int decode, int hash_values,
                     Py_ssize_t max_batches, Py_ssize_t max_records,
                     ColSet *bc, ColSet *rc, ColSet *hc, Gil *g, size_t *next_pos, int *reason)
{
    size_t pos = start;
    Py_ssize_t n = 0;
    for (;;) {
        size_t size = 0;
        int why = batch_at(buf, len, pos, stop, &size);
        if (why >= 0) {
            *reason = why;
            break;
        }
        if (n == max_batches) {
            *reason = REASON_FULL;
            break;
        }
        const uint8_t *p = buf + pos;
        if (colset_reserve(bc, n + 1, g) < 0)
            return -1;

        /* Header fields (DefaultRecordBatch.java).  size >= 61, so all are in bounds. */
        int64_t base_offset = as_i64(be64(p));
        uint32_t crc = be32(p + 17);
        int16_t attributes = as_i16(be16(p + 21));
        int32_t lod = as_i32(be32(p + 23));
        int64_t base_ts = as_i64(be64(p + 27));
        int64_t max_ts = as_i64(be64(p + 35));
        int32_t base_seq = as_i32(be32(p + 53));
        int32_t count = as_i32(be32(p + 57));
        /* CRC covers attributes (byte 21) to the end of the batch; baseOffset, batchLength,
         * partitionLeaderEpoch and magic are outside it (DefaultRecordBatch.computeChecksum). */
        uint32_t computed = crc32c_update(0, p + 21, size - 21);

        int16_t ctype = -2;
        int32_t cepoch = -1;
        if (attributes & 0x20) { /* isControl */
            if ((attributes & 0x07) == 0)
                parse_control(p + RECORDS_OFFSET, p + size, count, &ctype, &cepoch);
            else
                ctype = -1;
        }

        uint8_t decoded = 0;
        int32_t err_offset = -1;
        if (decode && decodable(attributes) && over_record_cap(count, max_records)) {
            decoded = 4; /* its records not decoded: segment reports the batch over the cap */
        } else if (decode && decodable(attributes)) {
            BatchCtx c = {buf, base_offset, base_ts, max_ts, (attributes & 0x08) != 0, base_seq, (int32_t)n,
                          hash_values};
            Py_ssize_t rsave = rc->n, hsave = hc->n;
            const uint8_t *err = NULL;
            int st = decode_blob(&c, p + RECORDS_OFFSET, p + size, count, rc, hc, g, &err);
            if (st == REC_NOMEM)
                return -1;
            if (st == REC_OK) {
                decoded = 1;
            } else { /* framing error, or too many headers: no partial rows for this batch */
                rc->n = rsave;
                hc->n = hsave;
                decoded = st == REC_HEADERS ? 3 : 2;
                err_offset = (int32_t)(err - p);
            }
        }

        PUT64(bc, B_POSITION, n, pos);
        PUT64(bc, B_BASE_OFFSET, n, base_offset);
        PUT64(bc, B_LAST_OFFSET, n, (uint64_t)base_offset + (uint64_t)(int64_t)lod);
        PUT32(bc, B_SIZE_BYTES, n, size);
        PUT32(bc, B_PARTITION_LEADER_EPOCH, n, be32(p + 12));
        PUT8(bc, B_MAGIC, n, 2);
        PUT32(bc, B_CRC, n, crc);
        PUT8(bc, B_CRC_VALID, n, computed == crc);
        PUT16(bc, B_ATTRIBUTES, n, attributes);
        PUT32(bc, B_LAST_OFFSET_DELTA, n, lod);
        PUT64(bc, B_BASE_TIMESTAMP, n, base_ts);
        PUT64(bc, B_MAX_TIMESTAMP, n, max_ts);
        PUT64(bc, B_PRODUCER_ID, n, be64(p + 43));
        PUT16(bc, B_PRODUCER_EPOCH, n, be16(p + 51));
        PUT32(bc, B_BASE_SEQUENCE, n, base_seq);
        /* DefaultRecordBatch.lastSequence: NO_SEQUENCE (-1) only for a base sequence of -1. */
        PUT32(bc, B_LAST_SEQUENCE, n, base_seq != -1 ? increment_sequence(base_seq, lod) : -1);
        PUT32(bc, B_COUNT, n, count);
        PUT16(bc, B_CONTROL_TYPE, n, ctype);
        PUT32(bc, B_COORDINATOR_EPOCH, n, cepoch);
        PUT8(bc, B_RECORDS_DECODED, n, decoded);
        PUT32(bc, B_ERR_OFFSET, n, err_offset);
        n++;
        bc->n = n;
        pos += size;
    }
    *next_pos = pos;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Python bindings                                                                            */
/* ------------------------------------------------------------------------------------------ */

PyDoc_STRVAR(crc32c_doc,
             "crc32c(data, crc=0) -> int\n\n"
             "CRC-32C (Castagnoli) of a bytes-like object, chainable like the `crc32c` PyPI package:\n"
             "crc32c(b, crc32c(a)) == crc32c(a + b).");

static PyObject *py_crc32c(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"data", "crc", NULL};
    Py_buffer view;
    unsigned int crc = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|I:crc32c", kwlist, &view, &crc))
        return NULL;
    uint32_t r;
    if (view.len >= GIL_RELEASE_BYTES) {
        Py_BEGIN_ALLOW_THREADS r = crc32c_update(crc, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        r = crc32c_update(crc, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(r);
}

PyDoc_STRVAR(xxh64_doc, "xxh64(data, seed=0) -> int\n\nXXH64 of a bytes-like object (the key_hash/value_hash function).");

static PyObject *py_xxh64(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"data", "seed", NULL};
    Py_buffer view;
    unsigned long long seed = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*|K:xxh64", kwlist, &view, &seed))
        return NULL;
    uint64_t h = xxh64(view.buf, (size_t)view.len, seed);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLongLong(h);
}

/* Build the result dict of one or two column sets; steals their columns. */
static PyObject *columns_dict(ColSet *a, ColSet *b)
{
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
    if (colset_finish(a, d) < 0 || (b && colset_finish(b, d) < 0)) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

PyDoc_STRVAR(walk_batches_doc,
             "walk_batches(buf, start, stop, decode_records, max_batches, hash_values=False, max_records=-1)\n"
             "    -> (n, columns, next_pos, reason, record_columns)\n\n"
             "Walk v2 record batches of `buf` from index `start`.  A batch may start only before `stop`\n"
             "(0 <= start <= stop <= len(buf)) but may extend to len(buf).  Per position: pos >= stop ->\n"
             "reason 0 (REACHED_STOP); fewer than 17 bytes -> 1 (NEED_MORE_DATA); magic != 2 -> 2 (NOT_V2);\n"
             "batchLength < 49 or > 2**30 -> 3 (BAD_LENGTH); batch runs past len(buf) -> 1; n == max_batches\n"
             "-> 4 (FULL).  next_pos is the start of the first batch not consumed.\n\n"
             "columns: dict name -> bytes of n*width native-endian values (see BATCH_COLUMNS).\n"
             "record_columns (None unless decode_records): records of uncompressed non-control batches\n"
             "(RECORD_COLUMNS) plus their headers (HEADER_COLUMNS), positions are indexes into buf.\n"
             "records_decoded: 0 not attempted, 1 ok, 2 framing error (no rows kept for that batch;\n"
             "err_offset = offset in the batch of the record, or trailing bytes, that failed), 3 more\n"
             "than MAX_BATCH_HEADERS header rows (no rows kept; err_offset = the record that passed it), 4\n"
             "more records counted than max_records (>= 0), not decoded (err_offset -1).");

static PyObject *py_walk_batches(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"buf", "start", "stop", "decode_records", "max_batches", "hash_values", "max_records",
                             NULL};
    Py_buffer view;
    Py_ssize_t start, stop, max_batches, max_records = -1;
    int decode, hash_values = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*nnpn|pn:walk_batches", kwlist, &view, &start, &stop, &decode,
                                     &max_batches, &hash_values, &max_records))
        return NULL;

    PyObject *result = NULL, *bdict = NULL, *rdict = NULL;
    ColSet bc, rc, hc;
    memset(&bc, 0, sizeof(bc));
    memset(&rc, 0, sizeof(rc));
    memset(&hc, 0, sizeof(hc));

    if (start < 0 || start > view.len || stop < start || stop > view.len) {
        PyErr_Format(PyExc_ValueError, "walk_batches: need 0 <= start <= stop <= len(buf) (start=%zd, stop=%zd, len=%zd)",
                     start, stop, view.len);
        goto done;
    }
    if (max_batches < 0) {
        PyErr_SetString(PyExc_ValueError, "walk_batches: max_batches must be >= 0");
        goto done;
    }

    const uint8_t *buf = view.buf;
    size_t next_pos = (size_t)start;
    int reason = REASON_REACHED_STOP;
    Gil g = {NULL};
    int release = view.len - start >= GIL_RELEASE_BYTES;
    /* Exact batch count (and a record bound): the columns are allocated once at their final
     * size rather than grown and copied (see scan_sizes). */
    Py_ssize_t nbatch = 0, nrec = 0;
    if (release)
        g.ts = PyEval_SaveThread();
    scan_sizes(buf, (size_t)view.len, (size_t)start, (size_t)stop, max_batches, max_records, &nbatch, &nrec);
    if (g.ts)
        PyEval_RestoreThread(g.ts);
    g.ts = NULL;
    if (colset_init(&bc, batch_cols, B_NCOLS, nbatch) < 0)
        goto done;
    if (decode && (colset_init(&rc, record_cols, R_NCOLS, nrec) < 0 ||
                   colset_init(&hc, header_cols, H_NCOLS, 64) < 0))
        goto done;

    if (release)
        g.ts = PyEval_SaveThread();
    int st = walk_core(buf, (size_t)view.len, (size_t)start, (size_t)stop, decode, hash_values, max_batches,
                       max_records, &bc,
                       decode ? &rc : NULL, decode ? &hc : NULL, &g, &next_pos, &reason);
    if (g.ts)
        PyEval_RestoreThread(g.ts);
    if (st < 0)
        goto done;

    Py_ssize_t n = bc.n;
    if (!(bdict = columns_dict(&bc, NULL)))
        goto done;
    if (decode) {
        if (!(rdict = columns_dict(&rc, &hc)))
            goto done;
    } else {
        rdict = Py_NewRef(Py_None);
    }
    result = Py_BuildValue("(nOniO)", n, bdict, (Py_ssize_t)next_pos, reason, rdict);

done:
    Py_XDECREF(bdict);
    Py_XDECREF(rdict);
    colset_free(&bc);
    colset_free(&rc);
    colset_free(&hc);
    PyBuffer_Release(&view);
    return result;
}

PyDoc_STRVAR(decode_records_doc,
             "decode_records(data, base_offset, base_timestamp, max_timestamp, log_append_time, base_sequence, count)\n"
             "    -> (columns, error_position, status)\n\n"
             "Decode `count` v2 records from an already-decompressed records blob, with the same framing\n"
             "rules and columns (RECORD_COLUMNS + HEADER_COLUMNS, batch_index all 0) as walk_batches;\n"
             "positions are indexes into `data`.  error_position is -1 on success; otherwise the index in\n"
             "`data` of the record that failed to frame (or of bytes left after the last record, or 0 for\n"
             "a negative count), and the columns hold the records completely decoded before it.  status\n"
             "is walk_batches' records_decoded: 1 ok, 2 framing error, 3 more than MAX_BATCH_HEADERS\n"
             "header rows (error_position: the record that passed it).");

static PyObject *py_decode_records(PyObject *self, PyObject *args, PyObject *kw)
{
    (void)self;
    static char *kwlist[] = {"data", "base_offset", "base_timestamp", "max_timestamp", "log_append_time",
                             "base_sequence", "count", "hash_values", NULL};
    Py_buffer view;
    long long base_offset, base_ts, max_ts;
    int lat, base_seq, count, hash_values = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*LLLpii|p:decode_records", kwlist, &view, &base_offset, &base_ts,
                                     &max_ts, &lat, &base_seq, &count, &hash_values))
        return NULL;

    PyObject *result = NULL, *dict = NULL;
    ColSet rc, hc;
    memset(&rc, 0, sizeof(rc));
    memset(&hc, 0, sizeof(hc));
    Py_ssize_t fit = view.len / 7 + 1;
    if (colset_init(&rc, record_cols, R_NCOLS, count > 0 && count < fit ? count : (fit < 1024 ? fit : 1024)) < 0 ||
        colset_init(&hc, header_cols, H_NCOLS, 16) < 0)
        goto done;

    const uint8_t *data = view.buf;
    BatchCtx c = {data, base_offset, base_ts, max_ts, lat, base_seq, 0, hash_values};
    const uint8_t *err = NULL;
    Gil g = {NULL};
    if (view.len >= GIL_RELEASE_BYTES)
        g.ts = PyEval_SaveThread();
    int st = decode_blob(&c, data, data + view.len, count, &rc, &hc, &g, &err);
    if (g.ts)
        PyEval_RestoreThread(g.ts);
    if (st == REC_NOMEM)
        goto done;
    if (!(dict = columns_dict(&rc, &hc)))
        goto done;
    /* The status as walk_batches' records_decoded: 1 ok, 2 framing error, 3 too many headers. */
    result = Py_BuildValue("(Oni)", dict, st == REC_OK ? (Py_ssize_t)-1 : (Py_ssize_t)(err - data),
                           st == REC_OK ? 1 : st == REC_HEADERS ? 3 : 2);

done:
    Py_XDECREF(dict);
    colset_free(&rc);
    colset_free(&hc);
    PyBuffer_Release(&view);
    return result;
}

/* Test/bench hooks: the portable CRC, and switching the walker between implementations. */
static PyObject *py_crc32c_portable(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I:_crc32c_portable", &view, &crc))
        return NULL;
    uint32_t r = ~crc32c_sw_raw(~crc, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(r);
}

static PyObject *py_set_crc_impl(PyObject *self, PyObject *arg)
{
    (void)self;
    int hw = PyObject_IsTrue(arg);
    if (hw < 0)
        return NULL;
    int previous = have_hw_crc;
    have_hw_crc = hw && cpu_has_sse42;
    return PyBool_FromLong(previous);
}

static PyMethodDef native_methods[] = {
    {"crc32c", (PyCFunction)(void (*)(void))py_crc32c, METH_VARARGS | METH_KEYWORDS, crc32c_doc},
    {"xxh64", (PyCFunction)(void (*)(void))py_xxh64, METH_VARARGS | METH_KEYWORDS, xxh64_doc},
    {"walk_batches", (PyCFunction)(void (*)(void))py_walk_batches, METH_VARARGS | METH_KEYWORDS, walk_batches_doc},
    {"decode_records", (PyCFunction)(void (*)(void))py_decode_records, METH_VARARGS | METH_KEYWORDS,
     decode_records_doc},
    {"_crc32c_portable", py_crc32c_portable, METH_VARARGS, "Slicing-by-8 CRC-32C (tests only)."},
    {"_set_crc_impl", py_set_crc_impl, METH_O,
     "_set_crc_impl(hw) -> previous: use the SSE4.2 CRC (if the CPU has it) or the table one (tests only)."},
    {NULL, NULL, 0, NULL},
};

static PyObject *coldefs_tuple(const ColDef *defs, int n)
{
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *item = Py_BuildValue("(sC)", defs[i].name, (int)defs[i].fmt);
        if (!item) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, item);
    }
    return t;
}

static int native_exec(PyObject *m)
{
    crc_init_tables();
#if KRA_X86
    __builtin_cpu_init();
    cpu_has_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
    have_hw_crc = cpu_has_sse42;
    if (PyModule_AddIntConstant(m, "HAVE_HW_CRC32C", cpu_has_sse42) < 0 ||
        PyModule_AddIntConstant(m, "REACHED_STOP", REASON_REACHED_STOP) < 0 ||
        PyModule_AddIntConstant(m, "NEED_MORE_DATA", REASON_NEED_MORE_DATA) < 0 ||
        PyModule_AddIntConstant(m, "NOT_V2", REASON_NOT_V2) < 0 ||
        PyModule_AddIntConstant(m, "BAD_LENGTH", REASON_BAD_LENGTH) < 0 ||
        PyModule_AddIntConstant(m, "FULL", REASON_FULL) < 0 ||
        PyModule_AddIntConstant(m, "MAX_BATCH_HEADERS", (long)MAX_BATCH_HEADERS) < 0)
        return -1;
    struct {
        const char *name;
        const ColDef *defs;
        int n;
    } sets[] = {{"BATCH_COLUMNS", batch_cols, B_NCOLS},
                {"RECORD_COLUMNS", record_cols, R_NCOLS},
                {"HEADER_COLUMNS", header_cols, H_NCOLS}};
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        PyObject *t = coldefs_tuple(sets[i].defs, sets[i].n);
        if (!t)
            return -1;
        if (PyModule_AddObject(m, sets[i].name, t) < 0) {
            Py_DECREF(t);
            return -1;
        }
    }
    return 0;
}

static PyModuleDef_Slot native_slots[] = {
    {Py_mod_exec, native_exec},
    {0, NULL},
};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT,
    "kafka_log_decoder._native",
    "Native walker over Kafka v2 record batches: CRC-32C, header columns, record framing.",
    0,
    native_methods,
    native_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__native(void) { return PyModuleDef_Init(&native_module); }
