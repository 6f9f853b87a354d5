/* Receive work queues through the real libibverbs and libmlx5: ibv_create_wq, the ring
 * libmlx5 made (mlx5dv_init_obj with MLX5DV_OBJ_RWQ), ibv_modify_wq, ibv_post_wq_recv,
 * ibv_destroy_wq, and what the kernel refuses on the way (a skipped state, a CQ destroyed
 * under a WQ).
 *
 * rwq_workout() is the whole exercise on an open device, for any program that wants it:
 * compile this file with -DRWQ_WORKOUT_NO_MAIN into another test and call it. It prints
 * one line that does not depend on the run and stores the two WQs' numbers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RWQ_FAIL(...) do { fprintf(stderr, "rwq_workout: " __VA_ARGS__); fprintf(stderr, "\n"); goto out; } while (0)

int rwq_workout(struct ibv_context *ctx, uint32_t wqn[2]);

/* libmlx5's mlx5dv_init_obj, from the global scope or from the libmlx5 libibverbs
 * loaded: the program does not link libmlx5 (linking it changes which GID table the
 * emulated device shows). */
static int (*rwq_init_obj(void))(struct mlx5dv_obj *, uint64_t)
{
	void *f = dlsym(RTLD_DEFAULT, "mlx5dv_init_obj");
	void *mlx5 = f ? NULL : dlopen("libmlx5.so.1", RTLD_NOW | RTLD_NOLOAD);
	if (mlx5)
		f = dlsym(mlx5, "mlx5dv_init_obj");
	return (int (*)(struct mlx5dv_obj *, uint64_t))f;
}

static struct ibv_wq *rwq_create(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_wq_init_attr a = { .wq_type = IBV_WQT_RQ, .max_wr = 16, .max_sge = 1, .pd = pd, .cq = cq };
	return ibv_create_wq(ctx, &a);
}

static int rwq_state(struct ibv_wq *wq, enum ibv_wq_state s)
{
	struct ibv_wq_attr a = { .attr_mask = IBV_WQ_ATTR_STATE, .wq_state = s };
	return ibv_modify_wq(wq, &a);
}

int rwq_workout(struct ibv_context *ctx, uint32_t wqn[2])
{
	enum { POSTED = 4, LEN = 256 };
	int ok = -1, err;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 32, NULL, NULL, 0) : NULL;
	char *buf = calloc(POSTED, LEN);
	struct ibv_mr *mr = cq && buf ? ibv_reg_mr(pd, buf, POSTED * LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
	struct ibv_wq *wq = NULL;
	if (!mr)
		RWQ_FAIL("setup: %s", strerror(errno));
	wq = rwq_create(ctx, pd, cq);
	if (!wq)
		RWQ_FAIL("ibv_create_wq: %s", strerror(errno));
	if (wq->state != IBV_WQS_RESET || wq->wq_type != IBV_WQT_RQ || wq->cq != cq || wq->pd != pd)
		RWQ_FAIL("the new WQ: state %d type %d", wq->state, wq->wq_type);
	wqn[0] = wq->wq_num;

	/* The ring libmlx5 made, as mlx5dv shows it: 16 entries of one 16-byte data segment. */
	int (*init_obj)(struct mlx5dv_obj *, uint64_t) = rwq_init_obj();
	struct mlx5dv_rwq dv = { 0 };
	struct mlx5dv_obj obj = { .rwq = { .in = wq, .out = &dv } };
	if (!init_obj || (err = init_obj(&obj, MLX5DV_OBJ_RWQ)))
		RWQ_FAIL("mlx5dv_init_obj(MLX5DV_OBJ_RWQ): %s", init_obj ? strerror(err) : "no libmlx5");
	if (!dv.buf || !dv.dbrec || dv.wqe_cnt != 16 || dv.stride != 16)
		RWQ_FAIL("mlx5dv ring: buf %p dbrec %p %u entries of %u bytes", dv.buf, (void *)dv.dbrec, dv.wqe_cnt,
			 dv.stride);

	/* Reset to ready skips nothing; reset to error does, and the kernel refuses it. */
	if ((err = rwq_state(wq, IBV_WQS_ERR)) != EINVAL)
		RWQ_FAIL("RESET to ERR answered %d, not EINVAL", err);
	if ((err = rwq_state(wq, IBV_WQS_RDY)))
		RWQ_FAIL("RESET to RDY: %s", strerror(err));

	/* Receives: each a data segment in the ring, the doorbell record their count. */
	for (int i = 0; i < POSTED; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + i * LEN), .length = LEN, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 500 + i, .sg_list = &sge, .num_sge = 1 }, *bad = NULL;
		if ((err = ibv_post_wq_recv(wq, &wr, &bad)))
			RWQ_FAIL("ibv_post_wq_recv %d: %s", i, strerror(err));
	}
	if (be32toh(*dv.dbrec) != POSTED)
		RWQ_FAIL("doorbell record %u after %d receives", be32toh(*dv.dbrec), POSTED);
	for (int i = 0; i < POSTED; i++) {
		struct mlx5_wqe_data_seg *d = (struct mlx5_wqe_data_seg *)((char *)dv.buf + i * dv.stride);
		if (be32toh(d->byte_count) != LEN || be32toh(d->lkey) != mr->lkey ||
		    be64toh(d->addr) != (uintptr_t)(buf + i * LEN))
			RWQ_FAIL("WQE %d: %u bytes, lkey %#x", i, be32toh(d->byte_count), be32toh(d->lkey));
	}

	/* The CQ is the WQ's while it lives; ready to error is a step the RQ takes. */
	if ((err = ibv_destroy_cq(cq)) != EBUSY)
		RWQ_FAIL("destroying the CQ under a WQ answered %d, not EBUSY", err);
	if ((err = rwq_state(wq, IBV_WQS_ERR)))
		RWQ_FAIL("RDY to ERR: %s", strerror(err));
	if ((err = ibv_destroy_wq(wq)))
		RWQ_FAIL("ibv_destroy_wq: %s", strerror(err));

	/* A second WQ on the same CQ, destroyed straight from reset. */
	wq = rwq_create(ctx, pd, cq);
	if (!wq)
		RWQ_FAIL("the second ibv_create_wq: %s", strerror(errno));
	wqn[1] = wq->wq_num;
	if ((err = ibv_destroy_wq(wq)))
		RWQ_FAIL("the second ibv_destroy_wq: %s", strerror(err));
	wq = NULL;
	printf("rwq_workout: 2 WQs, %u entries of %u bytes, %d receives posted, RESET-RDY-ERR, CQ busy under a WQ\n",
	       dv.wqe_cnt, dv.stride, POSTED);
	ok = 0;
out:
	if (wq)
		ibv_destroy_wq(wq);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq && ibv_destroy_cq(cq))
		ok = -1, fprintf(stderr, "rwq_workout: ibv_destroy_cq failed\n");
	if (pd && ibv_dealloc_pd(pd))
		ok = -1, fprintf(stderr, "rwq_workout: ibv_dealloc_pd failed\n");
	free(buf);
	return ok;
}

#ifndef RWQ_WORKOUT_NO_MAIN
int main(void)
{
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list && i < num && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "mlx5_0"))
			ctx = ibv_open_device(list[i]);
	if (!ctx) {
		fprintf(stderr, "rwq_workout: no mlx5_0\n");
		return 1;
	}
	uint32_t wqn[2] = { 0, 0 };
	if (rwq_workout(ctx, wqn))
		return 1;
	printf("rwq_workout: WQ numbers %#x %#x\n", wqn[0], wqn[1]);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
#endif
