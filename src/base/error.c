/* error.c: user errors (see error.h). Must not know any other module. */
#include <stdio.h>
#include "error.h"

void user_error_format(const UserError *err, char *out, size_t size) {
    if (!err->file[0]) snprintf(out, size, "%s", err->message);
    else if (err->line <= 0) snprintf(out, size, "%s: %s", err->file, err->message);
    else snprintf(out, size, "%s:%d:%d: %s", err->file, err->line, err->col > 0 ? err->col : 1, err->message);
}

void error_printable(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

int user_error_v(UserError *err, const char *file, int line, int col, const char *fmt, va_list ap) {
    char message[sizeof err->message]; /* fmt's arguments may point into err itself */
    vsnprintf(message, sizeof message, fmt, ap);
    snprintf(err->file, sizeof err->file, "%s", file ? file : "");
    snprintf(err->message, sizeof err->message, "%s", message);
    error_printable(err->file);
    error_printable(err->message);
    err->line = line;
    err->col = col;
    user_error_format(err, err->text, sizeof err->text);
    return ERR_USER;
}

int user_error(UserError *err, const char *file, int line, int col, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = user_error_v(err, file, line, col, fmt, ap);
    va_end(ap);
    return rc;
}
