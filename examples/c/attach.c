/*
 * attach.c: an existing verbs program hands its CQ to dvcq. It makes everything with
 * rdma-core as it always did (context, PD, MR, CQ, an RC QP connected to itself), then
 * attaches the CQ and the QP to dvcq, posts with ibv_post_send as before, and polls with
 * dvcq_cq_poll instead of ibv_poll_cq: same struct ibv_wc array, same handling.
 *
 *   ./attach DEVICE [GID_INDEX]     a real device (rxe0, mlx5_0, ...); exits 77 when there
 *                                   is none by that name (no RDMA here)
 *
 * Build: cc -o attach attach.c $(pkg-config --cflags --libs dvcq libibverbs)
 */
#include <infiniband/verbs.h>
#include <dvcq.h> /* after verbs.h: struct dvcq_wc is checked against struct ibv_wc */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIE(...)                                                                                 \
    do {                                                                                         \
        fprintf(stderr, "attach: " __VA_ARGS__);                                                 \
        fputc('\n', stderr);                                                                     \
        return 1;                                                                                \
    } while (0)

/* The GID index to use: the first IPv4-mapped (RoCE) GID, else 0 (InfiniBand). */
static int pick_gid(struct ibv_context *ctx, uint8_t port, int len)
{
    union ibv_gid gid;
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    int i;

    for (i = 0; i < len && i < 256; i++)
        if (ibv_query_gid(ctx, port, i, &gid) == 0 && memcmp(gid.raw, v4, sizeof(v4)) == 0)
            return i;
    return 0;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : NULL;
    struct ibv_device **list;
    struct ibv_context *ibv_ctx = NULL;
    struct ibv_port_attr port;
    union ibv_gid gid;
    struct ibv_pd *pd;
    struct ibv_mr *mr;
    struct ibv_cq *ibv_cq;
    struct ibv_qp *qp;
    struct ibv_qp_init_attr init = {0};
    struct ibv_qp_attr attr;
    struct ibv_sge sge;
    struct ibv_send_wr wr = {0}, *bad;
    struct dvcq_context *ctx;
    struct dvcq_cq *cq;
    struct ibv_wc wc[8]; /* ibv_wc itself: dvcq fills the same records */
    char reason[256], *buf;
    int i, n = 0, num, gid_index, ok;

    if (!name)
        DIE("usage: attach DEVICE [GID_INDEX]");
    list = ibv_get_device_list(&num);
    for (i = 0; list && i < num && !ibv_ctx; i++)
        if (strcmp(ibv_get_device_name(list[i]), name) == 0)
            ibv_ctx = ibv_open_device(list[i]);
    if (list)
        ibv_free_device_list(list);
    if (!ibv_ctx) {
        fprintf(stderr, "attach: no RDMA device %s here\n", name);
        return 77;
    }
    if (ibv_query_port(ibv_ctx, 1, &port))
        DIE("ibv_query_port failed");
    gid_index = argc > 2 ? atoi(argv[2]) : pick_gid(ibv_ctx, 1, port.gid_tbl_len);
    if (ibv_query_gid(ibv_ctx, 1, gid_index, &gid))
        DIE("ibv_query_gid %d failed", gid_index);

    buf = calloc(1, 4096);
    pd = ibv_alloc_pd(ibv_ctx);
    mr = pd ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
            : NULL;
    ibv_cq = ibv_create_cq(ibv_ctx, 64, NULL, NULL, 0);
    init.send_cq = init.recv_cq = ibv_cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = init.cap.max_recv_wr = 16;
    init.cap.max_send_sge = init.cap.max_recv_sge = 1;
    qp = ibv_cq && mr ? ibv_create_qp(pd, &init) : NULL;
    if (!qp)
        DIE("making the PD, MR, CQ or QP failed");

    /* RESET -> INIT -> RTR (to itself) -> RTS, as ibv_rc_pingpong does. */
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        DIE("INIT failed");
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = IBV_MTU_1024;
    attr.dest_qp_num = qp->qp_num;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = 1;
    attr.ah_attr.dlid = port.lid;
    if (port.link_layer == IBV_LINK_LAYER_ETHERNET || gid.global.interface_id) {
        attr.ah_attr.is_global = 1;
        attr.ah_attr.grh.dgid = gid;
        attr.ah_attr.grh.sgid_index = gid_index;
        attr.ah_attr.grh.hop_limit = 1;
    }
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        DIE("RTR failed");
    memset(&attr, 0, sizeof(attr));
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        DIE("RTS failed");

    /* The one change: dvcq polls the CQ. */
    if (dvcq_context_from_ibv(ibv_ctx, &ctx) < 0 || dvcq_cq_attach(ctx, ibv_cq, DVCQ_ATTACH_AUTO, &cq) < 0 ||
        dvcq_cq_attach_qp(cq, qp) < 0 || dvcq_cq_attach_mr(cq, mr) < 0)
        DIE("%s", dvcq_last_error());
    dvcq_cq_backend_reason(cq, reason, sizeof(reason));
    printf("device %s: backend %s (%s)\n", name, dvcq_backend_name(dvcq_cq_backend(cq)), reason);

    strcpy(buf, "dvcq!!!!");
    sge.addr = (uintptr_t)buf;
    sge.length = 8;
    sge.lkey = mr->lkey;
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)buf + 64;
    wr.wr.rdma.rkey = mr->rkey;
    if (ibv_post_send(qp, &wr, &bad))
        DIE("ibv_post_send failed");
    for (i = 0; i < 10000000 && n == 0; i++)
        n = dvcq_cq_poll(cq, 8, (struct dvcq_wc *)wc);
    if (n < 0)
        DIE("dvcq_cq_poll: %s", dvcq_last_error());
    if (n == 0)
        DIE("no completion");
    printf("wc wr_id=%llu status=%s opcode=%d data=\"%.8s\"\n", (unsigned long long)wc[0].wr_id,
           ibv_wc_status_str(wc[0].status), wc[0].opcode, buf + 64);

    ok = wc[0].status == IBV_WC_SUCCESS && memcmp(buf + 64, "dvcq!!!!", 8) == 0;
    /* A QP may go while its CQ stays with dvcq: dvcq lets go of it first. */
    if (dvcq_cq_detach_qp(cq, qp) < 0)
        DIE("%s", dvcq_last_error());
    if (ibv_destroy_qp(qp))
        DIE("ibv_destroy_qp failed");
    n = dvcq_cq_poll(cq, 8, (struct dvcq_wc *)wc);
    if (n != 0)
        DIE("%d completions after the QP's destroy (%s)", n, n < 0 ? dvcq_last_error() : "none expected");
    dvcq_cq_detach(cq);
    dvcq_context_close(ctx);
    ibv_destroy_cq(ibv_cq);
    ibv_dereg_mr(mr);
    ibv_dealloc_pd(pd);
    ibv_close_device(ibv_ctx);
    free(buf);
    return ok ? 0 : 1;
}
