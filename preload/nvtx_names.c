/* nvtx_names.c: NVTX messages, domains and registered strings as UTF-8 label texts. */
#include "preload/nvtx_names.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* NVTX declares the handles' structs and leaves them to the tool. */
struct nvtxDomainRegistration_st {
    struct nvtxDomainRegistration_st *next; /* protected by names_lock */
    size_t len;
    char name[];
};

struct nvtxStringRegistration_st {
    struct nvtxStringRegistration_st *next; /* protected by names_lock */
    char text[];
};

/* Registered strings are kept for the process (NVTX has no way to unregister one); past this
 * many bytes a registration gets NULL, whose events are labelled with the empty text. */
#define NAMES_STRING_BYTES ((size_t)64 << 20)

static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvtxDomainRegistration_st *names_domains; /* protected by names_lock */
static struct nvtxStringRegistration_st *names_strings; /* protected by names_lock */
static size_t names_string_bytes;                       /* protected by names_lock */

nvtxDomainHandle_t
nvtx_names_domain(const char *name)
{
    if (name == NULL)
        name = "";
    size_t len = strnlen(name, NVTX_NAMES_MAX - 2);
    pthread_mutex_lock(&names_lock);
    struct nvtxDomainRegistration_st *d = names_domains;
    while (d != NULL && (d->len != len || memcmp(d->name, name, len) != 0))
        d = d->next;
    if (d == NULL && (d = malloc(sizeof(*d) + len + 1)) != NULL) {
        memcpy(d->name, name, len);
        d->name[len] = '\0';
        d->len = len;
        d->next = names_domains;
        names_domains = d;
    }
    pthread_mutex_unlock(&names_lock);
    return d;
}

nvtxStringHandle_t
nvtx_names_register(const char *text)
{
    if (text == NULL)
        text = "";
    size_t len = strnlen(text, NVTX_NAMES_MAX - 1);
    struct nvtxStringRegistration_st *s = NULL;
    pthread_mutex_lock(&names_lock);
    if (names_string_bytes + len <= NAMES_STRING_BYTES &&
        (s = malloc(sizeof(*s) + len + 1)) != NULL) {
        memcpy(s->text, text, len);
        s->text[len] = '\0';
        s->next = names_strings;
        names_strings = s;
        names_string_bytes += len;
    }
    pthread_mutex_unlock(&names_lock);
    return s;
}

/* The number of bytes UTF-8 takes for c, with c replaced by U+FFFD when it is no scalar value. */
static size_t
utf8_len(uint32_t *c)
{
    if (*c >= 0xd800 && (*c < 0xe000 || *c > 0x10ffff))
        *c = 0xfffd;
    return *c < 0x80 ? 1 : *c < 0x800 ? 2 : *c < 0x10000 ? 3 : 4;
}

void
nvtx_names_utf8(const wchar_t *w, char *out, size_t cap)
{
    size_t n = 0;
    for (; w != NULL && *w != 0; w++) {
        uint32_t c = (uint32_t)*w;
        size_t len = utf8_len(&c);
        if (n + len >= cap)
            break;
        unsigned char *p = (unsigned char *)out + n;
        if (len == 1) {
            p[0] = (unsigned char)c;
        } else {
            static const unsigned char lead[] = {0, 0, 0xc0, 0xe0, 0xf0};
            for (size_t k = len - 1; k > 0; k--, c >>= 6)
                p[k] = (unsigned char)(0x80 | (c & 0x3f));
            p[0] = (unsigned char)(lead[len] | c);
        }
        n += len;
    }
    out[n] = '\0';
}

/* Copies at most cap - 1 bytes of s, cut at a UTF-8 character boundary; returns the length. */
static size_t
copy_cut(char *out, const char *s, size_t cap)
{
    size_t n = strnlen(s, cap - 1);
    if (s[n] != '\0')
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* s[n] starts a character: cut before it */
    memcpy(out, s, n);
    out[n] = '\0';
    return n;
}

const char *
nvtx_names_message(nvtxDomainHandle_t domain, int32_t type, const nvtxMessageValue_t *message,
                   char *buf, size_t cap)
{
    const char *text = "";
    if (type == NVTX_MESSAGE_TYPE_ASCII && message->ascii != NULL)
        text = message->ascii;
    else if (type == NVTX_MESSAGE_TYPE_REGISTERED && message->registered != NULL)
        text = message->registered->text;
    if (domain == NULL && type != NVTX_MESSAGE_TYPE_UNICODE)
        return text; /* the common case: no copy */
    size_t n = 0;
    if (domain != NULL) {
        n = copy_cut(buf, domain->name, cap - 1);
        buf[n++] = ':';
    }
    if (type == NVTX_MESSAGE_TYPE_UNICODE)
        nvtx_names_utf8(message->unicode, buf + n, cap - n);
    else
        copy_cut(buf + n, text, cap - n);
    return buf;
}

const char *
nvtx_names_event(nvtxDomainHandle_t domain, const nvtxEventAttributes_t *attr, char *buf,
                 size_t cap)
{
    static const nvtxMessageValue_t none = {.ascii = NULL};
    /* A smaller (older) attributes struct than ours may lack the message. */
    if (attr == NULL ||
        attr->size < offsetof(nvtxEventAttributes_t, message) + sizeof(attr->message))
        return nvtx_names_message(domain, NVTX_MESSAGE_UNKNOWN, &none, buf, cap);
    return nvtx_names_message(domain, attr->messageType, &attr->message, buf, cap);
}

void
nvtx_names_reset_after_fork(void)
{
    pthread_mutex_init(&names_lock, NULL);
}
