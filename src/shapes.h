/* shapes.h: the --shapes report (shape mainline, parameter counts, FLOPs per token).
 * Must not know: files, training, the tasks. */
#ifndef SHAPES_H
#define SHAPES_H
#include <stdio.h>
#include "config.h"
void shapes_print(const Config *cfg, FILE *out);
#endif
