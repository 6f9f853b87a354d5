/* A verbs program that loads libibverbs itself and calls it only through the handle, as
 * NCCL does (`dlopen` + `dlvsym(handle, ...)`), with RTLD_DEEPBIND when its argument is
 * "deepbind": the preload cannot see its calls, and must say so. It makes and polls a CQ on
 * the first device and prints what it did. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <string.h>

#define DIE(...) do { fprintf(stderr, "dlopen_verbs: " __VA_ARGS__); fprintf(stderr, "\n"); return 1; } while (0)
#define SYM(h, name) dlvsym(h, #name, "IBVERBS_1.1")

int main(int argc, char **argv)
{
	int deep = argc > 1 && strcmp(argv[1], "deepbind") == 0;
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL | (deep ? RTLD_DEEPBIND : 0));
	if (!h)
		DIE("dlopen: %s", dlerror());
	struct ibv_device **(*get_list)(int *) = (struct ibv_device **(*)(int *))SYM(h, ibv_get_device_list);
	struct ibv_context *(*open_dev)(struct ibv_device *) = (struct ibv_context *(*)(struct ibv_device *))SYM(h, ibv_open_device);
	struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int) =
		(struct ibv_cq *(*)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int))SYM(h, ibv_create_cq);
	int (*destroy_cq)(struct ibv_cq *) = (int (*)(struct ibv_cq *))SYM(h, ibv_destroy_cq);
	int (*close_dev)(struct ibv_context *) = (int (*)(struct ibv_context *))SYM(h, ibv_close_device);
	if (!get_list || !open_dev || !create_cq || !destroy_cq || !close_dev)
		DIE("dlvsym: %s", dlerror());
	int n;
	struct ibv_device **list = get_list(&n);
	if (!list || n == 0)
		DIE("no device");
	struct ibv_context *ctx = open_dev(list[0]);
	struct ibv_cq *cq = ctx ? create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!cq)
		DIE("no CQ");
	struct ibv_wc wc;
	printf("dlopen_verbs: empty poll: %d\n", ibv_poll_cq(cq, 1, &wc));
	if (destroy_cq(cq) || close_dev(ctx))
		DIE("destroy");
	printf("done\n");
	return 0;
}
