/* Native scans for gep.signals: the hot loops of signal extraction, each exact to the pure-Python
 * path beside it in gep/signals.py (tests/test_signals_native.py compares them on arbitrary text).
 *
 * Optional: setup.py builds it when a C compiler is present; gep.signals falls back to Python.
 * Strings follow the reference's JavaScript model: lengths in UTF-16 units, ASCII-only case
 * folding, JavaScript's whitespace set (\s).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define ERR_TAIL_UNITS 200 /* [^}]{0,200} */
#define KEY_UNITS 100      /* .slice(0, 100) */

static int js_ws(Py_UCS4 c)
{
    if (c < 0x80)
        return c == ' ' || (c >= '\t' && c <= '\r');
    return c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
           c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000 || c == 0xfeff;
}

static Py_UCS4 ascii_lower(Py_UCS4 c)
{
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/* The scan of recurring_error, written once per str storage kind (1, 2 or 4 bytes a character);
 * it counts each key with count_key. */
static int count_key(PyObject *counts, const Py_UCS4 *key, Py_ssize_t len);

#define DEFINE_ERROR_SCAN(NAME, T)                                                              \
    static int NAME##_starts_ci(const T *s, Py_ssize_t n, Py_ssize_t i, const char *lit)        \
    {                                                                                           \
        for (; *lit; lit++, i++) {                                                              \
            if (i >= n || ascii_lower(s[i]) != (Py_UCS4)(unsigned char)*lit)                    \
                return 0;                                                                       \
        }                                                                                       \
        return 1;                                                                               \
    }                                                                                           \
    /* End of the head (LLM error|"error"|"status":\s*"error") matched at i, or -1. */          \
    static Py_ssize_t NAME##_head(const T *s, Py_ssize_t n, Py_ssize_t i)                       \
    {                                                                                           \
        if (s[i] != '"')                                                                        \
            return NAME##_starts_ci(s, n, i + 1, "lm error") ? i + 9 : -1;                      \
        if (NAME##_starts_ci(s, n, i + 1, "error\""))                                           \
            return i + 7;                                                                       \
        if (!NAME##_starts_ci(s, n, i + 1, "status\":"))                                        \
            return -1;                                                                          \
        Py_ssize_t j = i + 9;                                                                   \
        while (j < n && js_ws(s[j]))                                                            \
            j++;                                                                                \
        return NAME##_starts_ci(s, n, j, "\"error\"") ? j + 7 : -1;                             \
    }                                                                                           \
    static int NAME(const T *s, Py_ssize_t n, PyObject *counts)                                 \
    {                                                                                           \
        Py_UCS4 key[KEY_UNITS];                                                                 \
        Py_ssize_t i = 0;                                                                       \
        while (i < n) {                                                                         \
            T c = s[i];                                                                         \
            if (c != 'l' && c != 'L' && c != '"') {                                             \
                i++;                                                                            \
                continue;                                                                       \
            }                                                                                   \
            Py_ssize_t end = NAME##_head(s, n, i);                                              \
            if (end < 0) {                                                                      \
                i++;                                                                            \
                continue;                                                                       \
            }                                                                                   \
            /* the tail: up to 200 units, none a '}'; half: its last character, astral, is cut */ \
            Py_ssize_t tail = 0;                                                                \
            int half = 0;                                                                       \
            while (end < n && s[end] != '}') {                                                  \
                int w = s[end] > 0xffff ? 2 : 1;                                                \
                if (tail + w > ERR_TAIL_UNITS) {                                                \
                    half = tail < ERR_TAIL_UNITS;                                               \
                    break;                                                                      \
                }                                                                               \
                tail += w;                                                                      \
                end++;                                                                          \
            }                                                                                   \
            /* the key: whitespace runs as one space, cut after 100 units */                    \
            Py_ssize_t klen = 0, kunits = 0, stop = end + half;                                 \
            int in_ws = 0;                                                                      \
            for (Py_ssize_t j = i; j < stop && kunits < KEY_UNITS; j++) {                       \
                Py_UCS4 ch = s[j];                                                              \
                if (j == end) /* the cut astral character: its high surrogate */                \
                    ch = 0xd800 + ((ch - 0x10000) >> 10);                                       \
                if (js_ws(ch)) {                                                                \
                    if (in_ws)                                                                  \
                        continue;                                                               \
                    in_ws = 1;                                                                  \
                    ch = ' ';                                                                   \
                }                                                                               \
                else {                                                                          \
                    in_ws = 0;                                                                  \
                }                                                                               \
                if (ch > 0xffff) {                                                              \
                    if (kunits + 2 > KEY_UNITS) {                                               \
                        key[klen++] = 0xd800 + ((ch - 0x10000) >> 10);                          \
                        break;                                                                  \
                    }                                                                           \
                    kunits += 2;                                                                \
                }                                                                               \
                else {                                                                          \
                    kunits += 1;                                                                \
                }                                                                               \
                key[klen++] = ch;                                                               \
            }                                                                                   \
            if (count_key(counts, key, klen) < 0)                                               \
                return -1;                                                                      \
            i = stop; /* a cut astral character's low surrogate cannot start a head */          \
        }                                                                                       \
        return 0;                                                                               \
    }

/* counts[k] += 1 (from 0); steals the reference to k (which may be NULL: an error already set) */
static int count(PyObject *counts, PyObject *k)
{
    if (k == NULL)
        return -1;
    PyObject *old = PyDict_GetItemWithError(counts, k);
    if (old == NULL && PyErr_Occurred()) {
        Py_DECREF(k);
        return -1;
    }
    PyObject *v = PyLong_FromLong(old == NULL ? 1 : PyLong_AsLong(old) + 1);
    int rc = v == NULL ? -1 : PyDict_SetItem(counts, k, v);
    Py_XDECREF(v);
    Py_DECREF(k);
    return rc;
}

static int count_key(PyObject *counts, const Py_UCS4 *key, Py_ssize_t len)
{
    return count(counts, PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, key, len));
}

DEFINE_ERROR_SCAN(error_scan1, Py_UCS1)
DEFINE_ERROR_SCAN(error_scan2, Py_UCS2)
DEFINE_ERROR_SCAN(error_scan4, Py_UCS4)

/* recurring_error(raw, min_count) -> (key, count) | None
 *
 * corpus.match(/(?:LLM error|"error"|"status":\s*"error")[^}]{0,200}/gi), each match with its
 * whitespace runs made one space and cut after 100 UTF-16 units, counted; the first key (in
 * first-seen order) with the highest count, if that count reaches min_count. A cut through an
 * astral character keeps its high surrogate, as a JavaScript slice does.
 */
static PyObject *recurring_error(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "recurring_error(raw: str, min_count: int)");
        return NULL;
    }
    PyObject *raw = args[0];
    long min_count = PyLong_AsLong(args[1]);
    if (min_count == -1 && PyErr_Occurred())
        return NULL;
    PyObject *counts = PyDict_New();
    if (counts == NULL)
        return NULL;
    const void *data = PyUnicode_DATA(raw);
    Py_ssize_t n = PyUnicode_GET_LENGTH(raw);
    int rc;
    switch (PyUnicode_KIND(raw)) {
    case PyUnicode_1BYTE_KIND:
        rc = error_scan1(data, n, counts);
        break;
    case PyUnicode_2BYTE_KIND:
        rc = error_scan2(data, n, counts);
        break;
    default:
        rc = error_scan4(data, n, counts);
    }
    if (rc < 0) {
        Py_DECREF(counts);
        return NULL;
    }
    PyObject *best_key = NULL, *dk, *dv;
    long best = 0;
    Py_ssize_t pos = 0;
    while (PyDict_Next(counts, &pos, &dk, &dv)) {
        long v = PyLong_AsLong(dv);
        if (v >= min_count && v > best) {
            best = v;
            best_key = dk;
        }
    }
    PyObject *result = best_key == NULL ? Py_NewRef(Py_None) : Py_BuildValue("(Ol)", best_key, best);
    Py_DECREF(counts);
    return result;
}

/* ---- UTF-8 byte scans */

/* Length of JavaScript whitespace at b[i] in UTF-8, or 0. */
static Py_ssize_t ws_len(const unsigned char *b, Py_ssize_t n, Py_ssize_t i)
{
    unsigned char c = b[i];
    if (c == ' ' || (c >= '\t' && c <= '\r'))
        return 1;
    if (c == 0xc2)
        return (i + 1 < n && b[i + 1] == 0xa0) ? 2 : 0;
    if (c < 0xe1 || c > 0xef || i + 2 >= n)
        return 0;
    unsigned char d = b[i + 1], e = b[i + 2];
    if (c == 0xe1)
        return (d == 0x9a && e == 0x80) ? 3 : 0;
    if (c == 0xe2) {
        if (d == 0x80)
            return (e <= 0x8a || e == 0xa8 || e == 0xa9 || e == 0xaf) ? 3 : 0;
        return (d == 0x81 && e == 0x9f) ? 3 : 0;
    }
    if (c == 0xe3)
        return (d == 0x80 && e == 0x80) ? 3 : 0;
    if (c == 0xef)
        return (d == 0xbb && e == 0xbf) ? 3 : 0;
    return 0;
}

/* The end of the whitespace run at b[i] (\s*); with keep_lf, a "\n" ends it. */
static Py_ssize_t skip_ws(const unsigned char *b, Py_ssize_t n, Py_ssize_t i, int keep_lf)
{
    Py_ssize_t w;
    while (i < n && !(keep_lf && b[i] == '\n') && (w = ws_len(b, n, i)) > 0)
        i += w;
    return i;
}

static int word_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int buffer_arg(PyObject *obj, const unsigned char **b, Py_ssize_t *n)
{
    if (!PyBytes_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "expected bytes");
        return -1;
    }
    *b = (const unsigned char *)PyBytes_AS_STRING(obj);
    *n = PyBytes_GET_SIZE(obj);
    return 0;
}

static Py_ssize_t find(const unsigned char *b, Py_ssize_t n, Py_ssize_t from, const char *lit, size_t m)
{
    if (from >= n)
        return -1;
    const unsigned char *p = memmem(b + from, (size_t)(n - from), lit, m);
    return p == NULL ? -1 : p - b;
}

/* tool_counts(b) -> {name: count}
 *
 * The names of /\[TOOL:\s*([\w-]+)\]/g in the UTF-8 corpus, counted in first-seen order.
 */
static PyObject *tool_counts(PyObject *self, PyObject *arg)
{
    const unsigned char *b;
    Py_ssize_t n;
    if (buffer_arg(arg, &b, &n) < 0)
        return NULL;
    PyObject *counts = PyDict_New();
    if (counts == NULL)
        return NULL;
    Py_ssize_t i = 0;
    while ((i = find(b, n, i, "[TOOL:", 6)) >= 0) {
        Py_ssize_t s = skip_ws(b, n, i + 6, 0), e = s;
        while (e < n && (word_char(b[e]) || b[e] == '-'))
            e++;
        if (e == s || e >= n || b[e] != ']') {
            i++;
            continue;
        }
        if (count(counts, PyUnicode_DecodeASCII((const char *)b + s, e - s, NULL)) < 0) {
            Py_DECREF(counts);
            return NULL;
        }
        i = e + 1;
    }
    return counts;
}

static int path_char(unsigned char c)
{
    return word_char(c) || c == '/' || c == '.' || c == '-';
}

/* benign_exec_count(b) -> int
 *
 * How many times /exec: (node\s+[\w\/.-]+\.js\s+ensure)/g matches the UTF-8 corpus. After
 * "\.js" comes whitespace, which the path class lacks: the path is the whole run of path
 * characters and ends in ".js".
 */
static PyObject *benign_exec_count(PyObject *self, PyObject *arg)
{
    const unsigned char *b;
    Py_ssize_t n;
    if (buffer_arg(arg, &b, &n) < 0)
        return NULL;
    long count = 0;
    Py_ssize_t i = 0;
    while ((i = find(b, n, i, "exec: node", 10)) >= 0) {
        Py_ssize_t s = skip_ws(b, n, i + 10, 0), e = s;
        if (s == i + 10) {
            i++;
            continue;
        }
        while (e < n && path_char(b[e]))
            e++;
        Py_ssize_t t = skip_ws(b, n, e, 0);
        if (e - s < 4 || memcmp(b + e - 3, ".js", 3) != 0 || t == e || t + 6 > n ||
            memcmp(b + t, "ensure", 6) != 0) {
            i++;
            continue;
        }
        count++;
        i = t + 6;
    }
    return PyLong_FromLong(count);
}

#ifdef __SSE2__
#include <emmintrin.h>

/* Word characters among the 16 bytes at p: [A-Za-z0-9_], as a byte mask (0xff or 0). */
static __m128i word_bytes16(const unsigned char *p)
{
    __m128i x = _mm_loadu_si128((const __m128i *)p);
    /* signed compares: a non-ASCII byte is negative, below every bound */
#define IN_RANGE(lo, hi) _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8((lo) - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8((hi) + 1)))
    __m128i w = _mm_or_si128(IN_RANGE('a', 'z'), IN_RANGE('A', 'Z'));
    w = _mm_or_si128(w, IN_RANGE('0', '9'));
#undef IN_RANGE
    return _mm_or_si128(w, _mm_cmpeq_epi8(x, _mm_set1_epi8('_')));
}

/* Bit k set: p[k] is a word character and p[k - 1] is not (p[-1] must be readable). */
static unsigned word_starts16(const unsigned char *p)
{
    __m128i cur = word_bytes16(p), prev = word_bytes16(p - 1);
    return (unsigned)_mm_movemask_epi8(_mm_andnot_si128(prev, cur));
}
#endif

/* Does word match at b[i]? In a word "\0" stands for \s* (a run, maybe empty, of JavaScript
 * whitespace) and "\1" for the same without "\n". Returns the end of the match, or -1. */
static Py_ssize_t word_at(const unsigned char *b, Py_ssize_t n, Py_ssize_t i, const char *w, Py_ssize_t m)
{
    for (Py_ssize_t k = 0; k < m; k++) {
        if (w[k] == '\0' || w[k] == '\1') {
            i = skip_ws(b, n, i, w[k] == '\1');
            continue;
        }
        if (i >= n || b[i] != (unsigned char)w[k])
            return -1;
        i++;
    }
    return i;
}

/* first_word(b, words, pos=0, bounded=True) -> (start, end, index) | None
 *
 * The first match at or after pos in the UTF-8 bytes b of /\b(w0|w1|...)\b/ (bounded) or of
 * /w0|w1|.../: the leftmost start, and there the first word in list order that matches (with a
 * word boundary after it, when bounded). Words are lower-case bytes, as word_at reads them; they
 * do not start with "\0" or "\1", and bounded ones start with a word character. \b is
 * JavaScript's (ASCII word characters; no byte of a multi-byte character is one).
 */
static PyObject *first_word(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const unsigned char *b;
    Py_ssize_t n, pos = 0;
    int bounded = 1;
    if (nargs < 2 || nargs > 4 || buffer_arg(args[0], &b, &n) < 0 || !PyTuple_Check(args[1])) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError,
                            "first_word(b: bytes, words: tuple[bytes, ...], pos: int = 0, bounded: bool = True)");
        return NULL;
    }
    if (nargs >= 3 && (pos = PyLong_AsSsize_t(args[2])) == -1 && PyErr_Occurred())
        return NULL;
    if (nargs == 4 && (bounded = PyObject_IsTrue(args[3])) < 0)
        return NULL;
    PyObject *words = args[1];
    Py_ssize_t nw = PyTuple_GET_SIZE(words);
    const char *ws[64];
    Py_ssize_t lens[64];
    unsigned char first[256] = {0};
    if (nw > 64) {
        PyErr_SetString(PyExc_ValueError, "first_word: at most 64 words");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < nw; k++) {
        PyObject *w = PyTuple_GET_ITEM(words, k);
        unsigned char c0 = PyBytes_Check(w) && PyBytes_GET_SIZE(w) > 0 ? (unsigned char)PyBytes_AS_STRING(w)[0] : 0;
        if (c0 <= 1 || (bounded && !word_char(c0))) {
            PyErr_SetString(PyExc_ValueError, "first_word: words are non-empty bytes, bounded ones starting with a letter");
            return NULL;
        }
        ws[k] = PyBytes_AS_STRING(w);
        lens[k] = PyBytes_GET_SIZE(w);
        first[c0] = 1;
    }
    Py_ssize_t i = pos < 0 ? 0 : pos;
#define TRY_AT(p)                                                                                  \
    do {                                                                                           \
        Py_ssize_t at = (p), e;                                                                    \
        if (first[b[at]])                                                                          \
            for (Py_ssize_t k = 0; k < nw; k++)                                                    \
                /* \b after: the last character and the next differ in being word characters */  \
                if ((unsigned char)ws[k][0] == b[at] && (e = word_at(b, n, at, ws[k], lens[k])) >= 0 && \
                    (!bounded || word_char(b[e - 1]) != (e < n && word_char(b[e]))))               \
                    return Py_BuildValue("(nnn)", at, e, k);                                       \
    } while (0)
#ifdef __SSE2__
    if (bounded) {
        /* a bounded word starts at a word start: find them 16 bytes at a time (from the second) */
        if (i == 0 && n > 0) {
            TRY_AT(0);
            i = 1;
        }
        for (; i + 16 <= n; i += 16) {
            unsigned mask = word_starts16(b + i);
            for (; mask; mask &= mask - 1)
                TRY_AT(i + __builtin_ctz(mask));
        }
    }
#endif
    for (; i < n; i++) {
        if (!bounded || i == 0 || !word_char(b[i - 1]))
            TRY_AT(i);
    }
#undef TRY_AT
    Py_RETURN_NONE;
}

/* contains(haystack, needle) -> bool: `needle in haystack` for bytes, by memmem. */
static PyObject *contains(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const unsigned char *b, *m;
    Py_ssize_t n, k;
    if (nargs != 2 || buffer_arg(args[0], &b, &n) < 0 || buffer_arg(args[1], &m, &k) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "contains(haystack: bytes, needle: bytes)");
        return NULL;
    }
    return PyBool_FromLong(memmem(b, (size_t)n, m, (size_t)k) != NULL);
}

static PyMethodDef methods[] = {
    {"recurring_error", (PyCFunction)(void (*)(void))recurring_error, METH_FASTCALL,
     "recurring_error(raw, min_count) -> (key, count) | None"},
    {"tool_counts", tool_counts, METH_O, "tool_counts(b) -> {name: count}"},
    {"benign_exec_count", benign_exec_count, METH_O, "benign_exec_count(b) -> int"},
    {"first_word", (PyCFunction)(void (*)(void))first_word, METH_FASTCALL,
     "first_word(b, words, pos=0, bounded=True) -> (start, end, index) | None"},
    {"contains", (PyCFunction)(void (*)(void))contains, METH_FASTCALL, "contains(haystack, needle) -> bool"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "gep._scan", "Native scans for gep.signals (exact to its Python path).", -1, methods,
};

PyMODINIT_FUNC PyInit__scan(void)
{
    return PyModule_Create(&module);
}
