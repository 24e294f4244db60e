/* error.h: the one user-error type of the program.
 *
 * Owns: UserError (file, line, column when known, message) and the single function that formats
 * it as "file:line:col: message" ("file: message" without a position, "message" without a file).
 * Must not know: any other module (config, tasks, results, training, analysis and the commands
 * all report through it), nor what to do about an error: functions return ERR_USER up to the
 * command, which prints err.text and exits 2.
 * A programming error (a shape that cannot be) is not a user error: that is CHECK (util.h). */
#ifndef ERROR_H
#define ERROR_H

#include <stdarg.h>
#include <stddef.h>

enum { ERR_OK = 0, ERR_USER = 2 }; /* ERR_USER is also the process exit status */

typedef struct {
    char file[1024];    /* the config, "--set", a data or results file; "" = none */
    int line, col;      /* 1-based; line 0 = no position: the text reads "file: message" */
    char message[2048]; /* what is wrong, and what would be right (one printable line) */
    char text[3200];    /* the whole line as user_error_format gives it: what the user sees */
} UserError;

/* Fill err (file, position, message from fmt; control characters become '?', so the text is
 * one printable line whatever the input held) and return ERR_USER. */
__attribute__((format(printf, 5, 6))) int user_error(UserError *err, const char *file, int line, int col,
                                                     const char *fmt, ...);
int user_error_v(UserError *err, const char *file, int line, int col, const char *fmt, va_list ap);

/* Control characters in s (an escape sequence, a carriage return, a newline) become '?', in place:
 * the one rule for text from a file that reaches a terminal, messages and check's lines alike. */
void error_printable(char *s);

/* "file:line:col: message", "file: message" (line 0) or "message" (no file): the only place the
 * program puts a position in front of a message. */
void user_error_format(const UserError *err, char *out, size_t size);

#endif
