/* term_on_fdopen.c - preloaded into trace-snap by test_errors: sends the
 * process SIGTERM inside fdopen, which q_write_file calls right after it
 * created the temporary output file, so that the signal arrives at the one
 * moment a kill could leave that file behind. A test tool only.
 *
 * Never: be preloaded into anything but that test's trace-snap.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>

FILE *fdopen(int fd, const char *mode)
{
	FILE *(*real)(int, const char *) = (FILE *(*)(int, const char *))dlsym(RTLD_NEXT, "fdopen");
	raise(SIGTERM);
	return real(fd, mode);
}
