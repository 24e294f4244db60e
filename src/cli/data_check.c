/* data_check.c: `harness data-check FILE ...`, the full check of token files that a run skips:
 * every id read, against the header's vocabulary and checksum (token_file_verify). Owns its
 * usage and output lines. The file format is data/token_file.c's. */
#include <stdio.h>
#include <string.h>
#include "data_check.h"
#include "base/error.h"
#include "data/token_file.h"

static const char *data_check_usage =
    "usage: harness data-check FILE ...\n"
    "  Reads every id of each token file (scripts/tokenize's train.bin, val.bin, test.bin, or a\n"
    "  headerless uint16 file): each below the header's vocabulary, the header's CRC-32 of the ids.\n"
    "  A run checks only the header against the file's size. Exit status 2 if any file fails.\n";

int data_check_main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(data_check_usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? ERR_USER : 0;
    }
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        char summary[320] = "", why[320] = "";
        if (token_file_verify(argv[i], summary, sizeof summary, why, sizeof why) == 0) {
            printf("%s: %s\n", argv[i], summary);
            continue;
        }
        UserError err;
        user_error(&err, argv[i], 0, 0, "%s", why);
        fprintf(stderr, "%s\n", err.text);
        rc = ERR_USER;
    }
    return rc;
}
