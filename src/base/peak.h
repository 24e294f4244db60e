/* peak.h: which phase of the process set its peak memory, for the run's memory line (train.c).
 * Each phase marks its end; the phase in which the peak RSS (util_peak_rss_mib, a high-water
 * mark that only rises) last rose is the one that set it. A phase is a name its caller gives, a
 * string that outlives the process's last line; marks come from the main thread, between
 * parallel regions.
 * Must not know: any module of the program (every src/ file may include it). */
#ifndef PEAK_H
#define PEAK_H

/* The phase that ran since the previous mark (or since the process began) ends here. */
void peak_phase_end(const char *phase);
/* The phase that set the peak so far, and that peak in MiB; NULL before any mark. */
const char *peak_phase_setter(double *mib);

#endif
