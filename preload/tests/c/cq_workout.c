/* A verbs program written the way applications write them, for the preload's tests: it
 * creates CQs and RC QP pairs on the first device, posts and polls with ibv_poll_cq, arms
 * and waits for events, destroys QPs with completions still in a CQ, receives through an
 * SRQ, and prints what it got, one line per completion, in a form that does not depend on
 * the run (no QP numbers, no addresses). Run with and without the preload, the output must
 * be the same. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The layouts libdvcq_preload.so pins (preload/src/layout.rs). */
_Static_assert(offsetof(struct ibv_context, ops) + offsetof(struct ibv_context_ops, poll_cq) == 96, "poll_cq");
_Static_assert(offsetof(struct ibv_context, ops) + offsetof(struct ibv_context_ops, req_notify_cq) == 104, "req_notify_cq");
_Static_assert(offsetof(struct ibv_context, abi_compat) == 320 && sizeof(struct ibv_context) == 328, "ibv_context");
_Static_assert(offsetof(struct verbs_context, create_cq_ex) - offsetof(struct verbs_context, context) == -120, "create_cq_ex");
_Static_assert(offsetof(struct verbs_context, create_qp_ex) - offsetof(struct verbs_context, context) == -56, "create_qp_ex");
_Static_assert(offsetof(struct verbs_context, create_srq_ex) - offsetof(struct verbs_context, context) == -40, "create_srq_ex");
_Static_assert(offsetof(struct verbs_context, create_wq) - offsetof(struct verbs_context, context) == -136, "create_wq");
_Static_assert(offsetof(struct verbs_context, destroy_wq) - offsetof(struct verbs_context, context) == -152, "destroy_wq");
_Static_assert(offsetof(struct verbs_context, sz) - offsetof(struct verbs_context, context) == -8, "sz");
_Static_assert(offsetof(struct ibv_cq, handle) == 24 && offsetof(struct ibv_cq, cqe) == 28, "ibv_cq");
_Static_assert(offsetof(struct ibv_qp, srq) == 40 && offsetof(struct ibv_qp, qp_num) == 52, "ibv_qp");
_Static_assert(offsetof(struct ibv_wq, cq) == 24 && offsetof(struct ibv_wq, wq_num) == 32, "ibv_wq");
_Static_assert(offsetof(struct ibv_cq_ex, status) == 132 && offsetof(struct ibv_cq_ex, wr_id) == 136, "ibv_cq_ex");
_Static_assert(offsetof(struct ibv_cq_ex, start_poll) == 144 && offsetof(struct ibv_cq_ex, read_opcode) == 168, "ibv_cq_ex");
_Static_assert(offsetof(struct ibv_cq_ex, read_completion_ts) == 248 && sizeof(struct ibv_cq_ex) == 288, "ibv_cq_ex");

#define DIE(...) do { fprintf(stderr, "cq_workout: " __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define BUF 65536

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char *buf;
static union ibv_gid gid;

static struct ibv_qp *make_qp(struct ibv_cq *scq, struct ibv_cq *rcq, struct ibv_srq *srq, int ex)
{
	struct ibv_qp *qp;
	if (ex) {
		struct ibv_qp_init_attr_ex a = {
			.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 32, .max_recv_wr = srq ? 0 : 32, .max_send_sge = 1, .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = pd,
		};
		qp = ibv_create_qp_ex(ctx, &a);
	} else {
		struct ibv_qp_init_attr a = {
			.send_cq = scq, .recv_cq = rcq, .srq = srq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 32, .max_recv_wr = srq ? 0 : 32, .max_send_sge = 1, .max_recv_sge = 1 },
		};
		qp = ibv_create_qp(pd, &a);
	}
	if (!qp)
		DIE("create qp: %s", strerror(errno));
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE };
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT");
	return qp;
}

static void connect_qp(struct ibv_qp *qp, uint32_t peer)
{
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = peer,
		.rq_psn = 0, .max_dest_rd_atomic = 1, .min_rnr_timer = 12 };
	at.ah_attr.is_global = 1;
	at.ah_attr.grh.dgid = gid;
	at.ah_attr.grh.sgid_index = 1;
	at.ah_attr.grh.hop_limit = 1;
	at.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR: %s", strerror(errno));
	struct ibv_qp_attr rts = { .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7, .rnr_retry = 7,
		.sq_psn = 0, .max_rd_atomic = 1 };
	if (ibv_modify_qp(qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS: %s", strerror(errno));
}

static void pair(struct ibv_qp *a, struct ibv_qp *b)
{
	connect_qp(a, b->qp_num);
	connect_qp(b, a->qp_num);
}

static void post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t id, size_t off, uint32_t len)
{
	struct ibv_sge s = { (uintptr_t)(buf + off), len, mr->lkey };
	struct ibv_recv_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1 }, *bad;
	int rc = srq ? ibv_post_srq_recv(srq, &w, &bad) : ibv_post_recv(qp, &w, &bad);
	if (rc)
		DIE("post recv: %s", strerror(rc));
}

static void post_send(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, size_t off, uint32_t len, size_t roff,
		      uint32_t imm)
{
	struct ibv_sge s = { (uintptr_t)(buf + off), len, mr->lkey };
	struct ibv_send_wr w = { .wr_id = id, .sg_list = &s, .num_sge = 1, .opcode = op, .send_flags = IBV_SEND_SIGNALED,
				 .imm_data = htobe32(imm) }, *bad;
	w.wr.rdma.remote_addr = (uintptr_t)(buf + roff);
	w.wr.rdma.rkey = mr->rkey;
	int rc = ibv_post_send(qp, &w, &bad);
	if (rc)
		DIE("post send: %s", strerror(rc));
}

/* Two QPs on `cq`, paired, `n` SENDs between them (receives `recv_id`.., sends `send_id`..)
 * left unpolled until the device finished them, then both QPs destroyed: their completions
 * stay in the ring for the provider (or dvcq) to clean. */
static void destroy_with_pending(struct ibv_cq *cq, int n, uint64_t recv_id, uint64_t send_id)
{
	struct ibv_qp *old[2] = { make_qp(cq, cq, NULL, 0), make_qp(cq, cq, NULL, 0) };
	pair(old[0], old[1]);
	for (int i = 0; i < n; i++) {
		post_recv(old[1], NULL, recv_id + i, 4096, 256);
		post_send(old[0], send_id + i, IBV_WR_SEND, 0, 8, 0, 0);
	}
	for (volatile long spin = 0; spin < 20000000; spin++)
		;
	if (ibv_destroy_qp(old[0]) || ibv_destroy_qp(old[1]))
		DIE("destroy qps with completions pending");
}

/* Polls `cq` `batch` at a time until `want` completions came (or a long while passed),
 * printing each; returns how many came. */
static int drain(const char *what, struct ibv_cq *cq, int want, int batch, struct ibv_qp **qps, int nqps)
{
	struct ibv_wc wc[16];
	int got = 0;
	for (long spins = 0; got < want && spins < 50000000; spins++) {
		memset(wc, 0, sizeof wc);
		int n = ibv_poll_cq(cq, batch, wc);
		if (n < 0)
			DIE("%s: ibv_poll_cq failed: %d", what, n);
		for (int i = 0; i < n; i++, got++) {
			int q = -1;
			for (int j = 0; j < nqps; j++)
				if (qps[j]->qp_num == wc[i].qp_num)
					q = j;
			printf("%s: wr_id %llu qp %d status %s opcode %d", what, (unsigned long long)wc[i].wr_id, q,
			       ibv_wc_status_str(wc[i].status), wc[i].status == IBV_WC_SUCCESS ? (int)wc[i].opcode : -1);
			if (wc[i].status == IBV_WC_SUCCESS && (wc[i].opcode & IBV_WC_RECV))
				printf(" byte_len %u", wc[i].byte_len);
			if (wc[i].status == IBV_WC_SUCCESS && (wc[i].opcode & IBV_WC_RECV) && (wc[i].wc_flags & IBV_WC_WITH_IMM))
				printf(" imm %u", be32toh(wc[i].imm_data));
			printf("\n");
		}
	}
	return got;
}

/* A receive WQ on a CQ that two QPs complete on too: the CQ cannot be destroyed under them
 * (the kernel answers EBUSY and the CQ goes on as before), and WQs come and go (each new
 * one likely where the last was freed) while the QPs' completions keep coming. */
static void wq_shares_a_cq(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	if (!cq)
		DIE("wq: cq: %s", strerror(errno));
	struct ibv_qp *q[2] = { make_qp(cq, cq, NULL, 0), make_qp(cq, cq, NULL, 0) };
	pair(q[0], q[1]);
	struct ibv_wq_init_attr a = { .wq_type = IBV_WQT_RQ, .max_wr = 16, .max_sge = 1, .pd = pd, .cq = cq };
	struct ibv_wq *wq = ibv_create_wq(ctx, &a);
	if (!wq)
		DIE("wq: create: %s", strerror(errno));
	for (int i = 0; i < 3; i++)
		post_send(q[0], 1100 + i, IBV_WR_RDMA_WRITE, 0, 8, 8192, 0);
	printf("wq: %d completions before\n", drain("wq", cq, 3, 16, q, 2));
	int rc = ibv_destroy_cq(cq);
	if (rc == 0)
		DIE("wq: the CQ was destroyed under a WQ and two QPs");
	printf("wq: destroying the CQ under them: %s\n", strerror(rc));
	for (int i = 0; i < 3; i++)
		post_send(q[0], 1200 + i, IBV_WR_RDMA_WRITE, 0, 8, 8192, 0);
	printf("wq: %d completions after the refused destroy\n", drain("wq-busy", cq, 3, 16, q, 2));
	for (int round = 0; round < 3; round++) {
		if ((rc = ibv_destroy_wq(wq)))
			DIE("wq: destroy: %s", strerror(rc));
		if (!(wq = ibv_create_wq(ctx, &a)))
			DIE("wq: create again: %s", strerror(errno));
	}
	post_send(q[0], 1300, IBV_WR_RDMA_WRITE, 0, 8, 8192, 0);
	printf("wq: %d completions after new WQs\n", drain("wq-new", cq, 1, 16, q, 2));
	if (ibv_destroy_wq(wq) || ibv_destroy_qp(q[0]) || ibv_destroy_qp(q[1]) || ibv_destroy_cq(cq))
		DIE("wq: teardown");
}

/* Polls the extended CQ `cq` with ibv_start_poll/ibv_next_poll/ibv_end_poll, at most `per`
 * completions between a start and its end, until `want` came, printing each with the
 * ibv_wc_read_* fields the CQ was made with (with `what` NULL: nothing, and only successful
 * completions of `qps` count); returns how many came. */
static int drain_ex(const char *what, struct ibv_cq_ex *cq, int want, int per, int with_ts, struct ibv_qp **qps, int nqps)
{
	struct ibv_poll_cq_attr pa = { 0 };
	int got = 0, sessions = 0;
	for (long spins = 0; got < want && spins < 50000000; spins++) {
		int rc = ibv_start_poll(cq, &pa);
		if (rc == ENOENT)
			continue;
		if (rc)
			DIE("%s: ibv_start_poll failed: %d", what, rc);
		sessions++;
		for (int in_session = 0;;) {
			uint32_t qpn = ibv_wc_read_qp_num(cq), src = ibv_wc_read_src_qp(cq);
			int q = -1, s = -1;
			for (int j = 0; j < nqps; j++) {
				if (qps[j]->qp_num == qpn)
					q = j;
				if (qps[j]->qp_num == src)
					s = j;
			}
			int ok = cq->status == IBV_WC_SUCCESS;
			enum ibv_wc_opcode op = ibv_wc_read_opcode(cq);
			unsigned int flags = ibv_wc_read_wc_flags(cq);
			if (!what) {
				/* Quiet: only what the caller counts. */
				got += ok && q >= 0;
				goto next;
			}
			printf("%s: wr_id %llu qp %d status %s opcode %d", what, (unsigned long long)cq->wr_id, q,
			       ibv_wc_status_str(cq->status), ok ? (int)op : -1);
			if (ok && (op & IBV_WC_RECV)) {
				printf(" byte_len %u src_qp %d sl %u slid %u path_bits %u", ibv_wc_read_byte_len(cq), s,
				       ibv_wc_read_sl(cq), ibv_wc_read_slid(cq), ibv_wc_read_dlid_path_bits(cq));
				if (flags & IBV_WC_WITH_IMM)
					printf(" imm %u", be32toh(ibv_wc_read_imm_data(cq)));
			}
			if (ok && op == IBV_WC_RDMA_READ)
				printf(" byte_len %u", ibv_wc_read_byte_len(cq));
			if (!ok)
				printf(" vendor_err %s", ibv_wc_read_vendor_err(cq) ? "set" : "0");
			if (ok)
				printf(" flags %#x", flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV | IBV_WC_GRH));
			if (with_ts && ok)
				printf(" ts %s", ibv_wc_read_completion_ts(cq) ? "set" : "0");
			printf("\n");
			got++;
next:
			/* Stop before next_poll: it would consume a completion this session does not read. */
			if (++in_session == per || got == want)
				break;
			rc = ibv_next_poll(cq);
			if (rc == ENOENT)
				break;
			if (rc)
				DIE("%s: ibv_next_poll failed: %d", what, rc);
		}
		ibv_end_poll(cq);
	}
	return got;
}

/* 6. An extended CQ made with several fields, polled with start/next/end and the readers:
 * ENOENT when empty, sessions broken off before next_poll, arming after the polls and an
 * event, ibv_poll_cq on it too, and a QP destroyed with its completions in it. */
static void extended_cq(void)
{
	struct ibv_device_attr_ex ax;
	int with_ts = ibv_query_device_ex(ctx, NULL, &ax) == 0 && ax.completion_timestamp_mask != 0;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 64, .channel = ch,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
			    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS |
			    (with_ts ? IBV_WC_EX_WITH_COMPLETION_TIMESTAMP : 0),
	};
	struct ibv_cq_ex *cqx = ch ? ibv_create_cq_ex(ctx, &ca) : NULL;
	if (!cqx)
		DIE("ibv_create_cq_ex: %s", strerror(errno));
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
	struct ibv_poll_cq_attr pa = { 0 };
	int rc = ibv_start_poll(cqx, &pa);
	printf("ext: empty: %s\n", rc == ENOENT ? "ENOENT" : "NOT ENOENT");
	if (rc == 0)
		ibv_end_poll(cqx);

	struct ibv_qp *qp[2] = { make_qp(cq, cq, NULL, 0), make_qp(cq, cq, NULL, 1) };
	pair(qp[0], qp[1]);
	for (int i = 0; i < 6; i++)
		post_recv(qp[1], NULL, 1100 + i, 4096 + i * 256, 256);
	for (int i = 0; i < 6; i++)
		post_send(qp[0], 1000 + i, i % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, i * 64, 30 + i, 0, 2000 + i);
	post_send(qp[0], 1020, IBV_WR_RDMA_WRITE, 0, 256, 8192, 0);
	post_send(qp[0], 1021, IBV_WR_RDMA_READ, 12288, 96, 0, 0);
	printf("ext: %d completions\n", drain_ex("ext", cqx, 14, 3, with_ts, qp, 2));
	/* After ibv_end_poll the readers still give the last completion (undefined by the man
	 * page, but libmlx5 and rxe do, and pyverbs' tests read the opcode so). */
	printf("ext: after end_poll: wr_id %llu opcode %d\n", (unsigned long long)cqx->wr_id, ibv_wc_read_opcode(cqx));
	rc = ibv_start_poll(cqx, &pa);
	printf("ext: drained: %s\n", rc == ENOENT ? "ENOENT" : "NOT ENOENT");
	if (rc == 0)
		ibv_end_poll(cqx);

	/* More sends and receives than the queues hold, in rounds: each round's posts need the
	 * room the previous round's completions made (the queue tails rdma-core reads when
	 * posting, written back by whoever polled). */
	int rounds = 0;
	for (int r = 0; r < 3; r++) {
		for (int i = 0; i < 16; i++) {
			post_recv(qp[1], NULL, 1900 + i, 4096 + i * 256, 256);
			post_send(qp[0], 1950 + i, IBV_WR_SEND, 0, 8, 0, 0);
		}
		rounds += drain_ex(NULL, cqx, 32, 5, with_ts, qp, 2) == 32;
	}
	printf("ext: %d rounds of 32 completions, past the queues' depth\n", rounds);

	/* Arming after start/next/end polls: no event before a new completion, one after it. */
	if (ibv_req_notify_cq(cq, 0))
		DIE("arm ext");
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	printf("ext events: before a completion: %s\n", poll(&pfd, 1, 300) == 0 ? "none" : "EARLY EVENT");
	post_recv(qp[1], NULL, 1200, 4096, 256);
	post_send(qp[0], 1201, IBV_WR_SEND_WITH_IMM, 0, 24, 0, 77);
	if (poll(&pfd, 1, 5000) != 1)
		DIE("no event for the extended CQ's completion");
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx) || ev_cq != cq)
		DIE("get_cq_event ext");
	ibv_ack_cq_events(ev_cq, 1);
	printf("ext events: %d completions after an event\n", drain_ex("ext-event", cqx, 2, 16, with_ts, qp, 2));

	/* ibv_poll_cq on the same extended CQ (perftest polls its extended CQs so). */
	post_recv(qp[1], NULL, 1300, 4096, 256);
	post_send(qp[0], 1301, IBV_WR_SEND, 0, 12, 0, 0);
	printf("ext: %d completions through ibv_poll_cq\n", drain("ext-poll_cq", cq, 2, 16, qp, 2));

	/* A QP destroyed with its completions in the ring; the other QP's come next. */
	destroy_with_pending(cq, 3, 1400, 1410);
	post_recv(qp[1], NULL, 1500, 4096, 256);
	post_send(qp[0], 1501, IBV_WR_SEND, 0, 8, 0, 0);
	printf("ext destroyed qps: %d completions of the live qps\n", drain_ex("ext-after-destroy", cqx, 2, 1, with_ts, qp, 2));
	rc = ibv_start_poll(cqx, &pa);
	printf("ext destroyed qps: %s left over\n", rc == ENOENT ? "none" : "SOME");
	if (rc == 0)
		ibv_end_poll(cqx);

	for (int i = 0; i < 2; i++)
		ibv_destroy_qp(qp[i]);
	if (ibv_destroy_cq(cq))
		DIE("destroy the extended CQ");
	ibv_destroy_comp_channel(ch);
}

/* libmlx5's function `name`: from the global scope first, where a program that links
 * libmlx5 finds it (and where the preload's is), otherwise from libmlx5's copy that
 * libibverbs loaded. (This program does not link libmlx5: the emulated device then shows
 * another GID table.) */
static void *mlx5_fn(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	void *mlx5 = f ? NULL : dlopen("libmlx5.so.1", RTLD_NOW | RTLD_NOLOAD);
	return mlx5 ? dlsym(mlx5, name) : f;
}

/* 6b. An extended CQ made by mlx5dv_create_cq, polled with start/next/end. */
static void mlx5dv_cq(void)
{
	struct ibv_cq_ex *(*create)(struct ibv_context *, struct ibv_cq_init_attr_ex *, struct mlx5dv_cq_init_attr *) =
		(struct ibv_cq_ex * (*)(struct ibv_context *, struct ibv_cq_init_attr_ex *, struct mlx5dv_cq_init_attr *))
			mlx5_fn("mlx5dv_create_cq");
	struct ibv_cq_init_attr_ex ca = { .cqe = 32, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct mlx5dv_cq_init_attr da = { 0 };
	struct ibv_cq_ex *cqx = create ? create(ctx, &ca, &da) : NULL;
	if (!cqx)
		DIE("mlx5dv_create_cq: %s", strerror(errno));
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
	struct ibv_qp *qp[2] = { make_qp(cq, cq, NULL, 0), make_qp(cq, cq, NULL, 0) };
	pair(qp[0], qp[1]);
	for (int i = 0; i < 2; i++) {
		post_recv(qp[1], NULL, 1800 + i, 4096 + i * 256, 256);
		post_send(qp[0], 1810 + i, IBV_WR_SEND_WITH_IMM, 0, 16 + i, 0, 3000 + i);
	}
	printf("mlx5dv cq: %d completions\n", drain_ex("mlx5dv-cq", cqx, 4, 2, 0, qp, 2));
	for (int i = 0; i < 2; i++)
		ibv_destroy_qp(qp[i]);
	if (ibv_destroy_cq(cq))
		DIE("destroy the mlx5dv CQ");
}

/* 7. A program that reads a CQ's ring itself, as UCX's rc_mlx5 does: mlx5dv_init_obj right
 * after creating the CQ, then its own poll of the CQEs (owner bit against its own consumer
 * index, the doorbell record's consumer index, its word 0, written back). */
static void raw_ring(void)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct mlx5dv_cq dv;
	struct mlx5dv_obj o = { .cq = { .in = cq, .out = &dv } };
	int (*init_obj)(struct mlx5dv_obj *, uint64_t) = (int (*)(struct mlx5dv_obj *, uint64_t))mlx5_fn("mlx5dv_init_obj");
	if (!cq || !init_obj || init_obj(&o, MLX5DV_OBJ_CQ))
		DIE("mlx5dv_init_obj: not an mlx5 CQ");
	struct ibv_qp *qp[2] = { make_qp(cq, cq, NULL, 0), make_qp(cq, cq, NULL, 0) };
	pair(qp[0], qp[1]);
	for (int i = 0; i < 3; i++) {
		post_recv(qp[1], NULL, 1600 + i, 4096 + i * 256, 256);
		post_send(qp[0], 1700 + i, IBV_WR_SEND, 0, 20 + i, 0, 0);
	}
	uint32_t ci = 0;
	int got = 0;
	for (long spins = 0; got < 6 && spins < 50000000; spins++) {
		struct mlx5_cqe64 *c = (struct mlx5_cqe64 *)((char *)dv.buf + (ci & (dv.cqe_cnt - 1)) * dv.cqe_size +
							     (dv.cqe_size == 128 ? 64 : 0));
		uint8_t op = mlx5dv_get_cqe_opcode(c);
		if (op == MLX5_CQE_INVALID || mlx5dv_get_cqe_owner(c) != !!(ci & dv.cqe_cnt))
			continue;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		uint32_t qpn = be32toh(c->sop_drop_qpn) & 0xffffff;
		printf("raw: cqe opcode %u qp %d byte_cnt %u\n", op, qpn == qp[0]->qp_num ? 0 : qpn == qp[1]->qp_num ? 1 : -1,
		       op == MLX5_CQE_RESP_SEND ? be32toh(c->byte_cnt) : 0);
		ci++;
		got++;
		__atomic_thread_fence(__ATOMIC_RELEASE);
		dv.dbrec[0] = htobe32(ci & 0xffffff);
	}
	printf("raw: %d cqes read from the ring\n", got);
	for (int i = 0; i < 2; i++)
		ibv_destroy_qp(qp[i]);
	if (ibv_destroy_cq(cq))
		DIE("destroy the raw CQ");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || !num)
		DIE("no device");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		DIE("open %s", ibv_get_device_name(list[0]));
	if (ibv_query_gid(ctx, 1, 1, &gid))
		DIE("gid");
	pd = ibv_alloc_pd(ctx);
	buf = calloc(1, BUF);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, ch, 0);
	if (!pd || !mr || !ch || !cq)
		DIE("setup: %s", strerror(errno));

	/* 1. Sends (with and without immediate), a write, a read: polled 3 at a time. */
	struct ibv_qp *qp[2] = { make_qp(cq, cq, NULL, 0), make_qp(cq, cq, NULL, 1) };
	pair(qp[0], qp[1]);
	for (int i = 0; i < 8; i++)
		post_recv(qp[1], NULL, 100 + i, 4096 + i * 256, 256);
	for (int i = 0; i < 8; i++) {
		memset(buf + i * 64, 'a' + i, 64);
		post_send(qp[0], i, i % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, i * 64, 40 + i, 0, 1000 + i);
	}
	post_send(qp[0], 20, IBV_WR_RDMA_WRITE, 0, 512, 8192, 0);
	post_send(qp[0], 21, IBV_WR_RDMA_READ, 12288, 128, 0, 0);
	printf("sends: %d completions\n", drain("sends", cq, 18, 3, qp, 2));
	printf("data: %s\n", memcmp(buf + 4096 + 3 * 256, buf + 3 * 64, 43) == 0 && memcmp(buf, buf + 12288, 128) == 0
				     ? "landed" : "WRONG");

	/* 2. Arming after polling: no event may come before a new completion, and one must
	 * come after it. */
	if (ibv_req_notify_cq(cq, 0))
		DIE("arm");
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	printf("events: before a completion: %s\n", poll(&pfd, 1, 300) == 0 ? "none" : "EARLY EVENT");
	post_recv(qp[1], NULL, 200, 4096, 256);
	post_send(qp[0], 30, IBV_WR_SEND, 0, 16, 0, 0);
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	int waited = 0;
	int got = 0;
	while (got < 2) {
		if (poll(&pfd, 1, 5000) != 1)
			DIE("no event for the completion");
		if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx))
			DIE("get_cq_event");
		ibv_ack_cq_events(ev_cq, 1);
		waited++;
		if (ibv_req_notify_cq(ev_cq, 0))
			DIE("rearm");
		got += drain("events", ev_cq, 2 - got, 16, qp, 2);
	}
	printf("events: %d completions after %s\n", got, waited > 0 ? "an event" : "no event");

	/* 3. QPs destroyed with completions still in the CQ; the next QPs' completions only. */
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	destroy_with_pending(cq2, 4, 300, 400);
	struct ibv_qp *nw[2] = { make_qp(cq2, cq2, NULL, 0), make_qp(cq2, cq2, NULL, 0) };
	pair(nw[0], nw[1]);
	post_recv(nw[1], NULL, 500, 4096, 256);
	post_send(nw[0], 501, IBV_WR_SEND, 0, 8, 0, 0);
	printf("destroyed qps: %d completions of the new qps\n", drain("after-destroy", cq2, 2, 16, nw, 2));
	struct ibv_wc extra;
	printf("destroyed qps: %d left over\n", ibv_poll_cq(cq2, 1, &extra));

	/* 4. Receives through an SRQ, polled one at a time. */
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 32, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(pd, &sa);
	if (!srq)
		DIE("srq: %s", strerror(errno));
	struct ibv_cq *cq3 = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	struct ibv_qp *sq[2] = { make_qp(cq3, cq3, NULL, 0), make_qp(cq3, cq3, srq, 0) };
	pair(sq[0], sq[1]);
	for (int i = 0; i < 6; i++)
		post_recv(NULL, srq, 600 + i, 16384 + i * 128, 128);
	for (int i = 0; i < 6; i++)
		post_send(sq[0], 700 + i, IBV_WR_SEND, 0, 10 + i, 0, 0);
	printf("srq: %d completions\n", drain("srq", cq3, 12, 1, sq, 2));
	for (int i = 0; i < 3; i++)
		post_recv(NULL, srq, 800 + i, 16384 + i * 128, 128);
	for (int i = 0; i < 3; i++)
		post_send(sq[0], 900 + i, IBV_WR_SEND, 0, 20, 0, 0);
	printf("srq again: %d completions\n", drain("srq2", cq3, 6, 4, sq, 2));

	/* 5. Resize: whatever the device answers, the CQ goes on working. */
	int rrc = ibv_resize_cq(cq3, 128);
	printf("resize: %s\n", rrc == 0 ? "done" : "refused");
	post_recv(NULL, srq, 950, 16384, 128);
	post_send(sq[0], 951, IBV_WR_SEND, 0, 20, 0, 0);
	printf("after resize: %d completions\n", drain("resized", cq3, 2, 16, sq, 2));

	extended_cq();
	mlx5dv_cq();
	raw_ring();
	wq_shares_a_cq();

	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(qp[i]);
		ibv_destroy_qp(nw[i]);
		ibv_destroy_qp(sq[i]);
	}
	ibv_destroy_srq(srq);
	if (ibv_destroy_cq(cq) || ibv_destroy_cq(cq2) || ibv_destroy_cq(cq3))
		DIE("destroy cq");
	ibv_destroy_comp_channel(ch);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
