/* peak.c: the phase that set the process's peak memory (peak.h). Owns the one record of it.
 * Must not know: any module of the program. */
#include "peak.h"
#include "util.h"

static const char *setter;
static double setter_mib;

void peak_phase_end(const char *phase) {
    const double mib = util_peak_rss_mib();
    if (!setter || mib > setter_mib) setter = phase, setter_mib = mib;
}

const char *peak_phase_setter(double *mib) {
    if (mib) *mib = setter_mib;
    return setter;
}
