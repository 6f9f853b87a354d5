/* A measuring shim for tests/perf/preload-perftest-callgrind, loaded with LD_PRELOAD before
 * libdvcq_preload.so (when that is loaded): at ibv_open_device it puts count_poll in front of
 * whatever the context's ops.poll_cq is then (libmlx5's or libirdma's poll, or the preload's
 * dispatch), so that callgrind charges the poll the program calls to one caller, count_poll,
 * whatever its name; and it counts what those polls returned: calls, calls that returned
 * nothing, completions. It then polls an empty CQ of its own PROBES times from probe_empty,
 * another caller, which gives the cost of one empty poll of the same op exactly.
 * At exit: "poll-count: calls C empty E completions N probes P" on stderr.
 * The shim's own instructions are not part of the figures: callgrind charges the callee's
 * inclusive cost to the call arc count_poll -> op. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>

enum { PROBES = 1000 };

typedef int (*poll_fn)(struct ibv_cq *, int, struct ibv_wc *);

/* One op for every context: perftest opens one device; a second context with another op
 * would be counted under the first one's figures, so it is refused (reported at exit). */
static poll_fn inner;
static unsigned long long calls, empty, completions, probes, foreign;

static int count_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int r = inner(cq, n, wc);
	calls++;
	if (r == 0)
		empty++;
	else if (r > 0)
		completions += (unsigned long long)r;
	return r;
}

/* noinline: its calls of the op must stay an arc of their own in callgrind's graph. */
static __attribute__((noinline)) void probe_empty(struct ibv_context *ctx)
{
	struct ibv_wc wc[16];
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		return;
	for (int i = 0; i < PROBES; i++)
		if (inner(cq, 16, wc) == 0)
			probes++;
	ibv_destroy_cq(cq);
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct ibv_context *(*next)(struct ibv_device *) =
		(struct ibv_context * (*)(struct ibv_device *)) dlsym(RTLD_NEXT, "ibv_open_device");
	struct ibv_context *ctx = next ? next(device) : NULL;
	if (!ctx)
		return ctx;
	if (inner && ctx->ops.poll_cq != inner) {
		foreign++;
		return ctx;
	}
	inner = ctx->ops.poll_cq;
	ctx->ops.poll_cq = count_poll;
	probe_empty(ctx);
	return ctx;
}

int ibv_close_device(struct ibv_context *ctx)
{
	int (*next)(struct ibv_context *) = (int (*)(struct ibv_context *))dlsym(RTLD_NEXT, "ibv_close_device");
	if (ctx->ops.poll_cq == count_poll)
		ctx->ops.poll_cq = inner;
	return next ? next(ctx) : -1;
}

static __attribute__((destructor)) void report(void)
{
	fprintf(stderr, "poll-count: calls %llu empty %llu completions %llu probes %llu foreign-contexts %llu\n",
		calls, empty, completions, probes, foreign);
}
