/* Strict command-line values for the example programs: a flag's value must
 * be a whole number (or a finite real) inside the stated range, else the
 * error names the flag, the value and the range. */
#ifndef DISTMGR_EXAMPLES_CLI_H
#define DISTMGR_EXAMPLES_CLI_H

#include <stdint.h>

#include <distmgr.h>

dist_status cli_int(const char *flag, const char *value, int64_t lo, int64_t hi, int64_t *out);
dist_status cli_real(const char *flag, const char *value, double lo, double hi, double *out);

#endif
