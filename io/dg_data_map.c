/* dg_data_map.c — see dg_data_map.h. */
#define _POSIX_C_SOURCE 200809L
#include "dg_data_map.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int dg_map_file(dg_map *m, const char *path, dg_err *err) {
    m->p = NULL;
    m->n = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return dg_err_set(err, DG_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return dg_err_set(err, DG_EINPUT, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return dg_err_set(err, DG_EINPUT, "%s: cannot mmap: %s", path, strerror(e));
        }
        m->p = p;
        m->n = (size_t)st.st_size;
    }
    close(fd);
    return DG_OK;
}

void dg_unmap(dg_map *m) {
    if (m->p) munmap((void *)m->p, m->n);
    m->p = NULL;
    m->n = 0;
}

int dg_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int dg_mkdirs(const char *path, dg_err *err) {
    char *tmp = dg_strdup(path);
    size_t n = strlen(tmp);
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == 0) {
            char c = tmp[i];
            tmp[i] = 0;
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST) {
                int e = errno;
                dg_free(tmp);
                return dg_err_set(err, DG_EINPUT, "%s: cannot create directory: %s", path, strerror(e));
            }
            tmp[i] = c;
        }
    }
    dg_free(tmp);
    return DG_OK;
}
