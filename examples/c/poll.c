/*
 * poll.c: dvcq's C API on a model or a device, no NIC needed for the models.
 *
 * An RC QP connected to itself writes 8 bytes into its own memory region, then sends them
 * to a receive it posted; the three completions are polled (the write's with
 * dvcq_cq_poll, the rest with the event-mode dvcq_cq_wait) and printed with their
 * libibverbs numbers, then the CQ's backend, statistics and the error convention.
 *
 *   ./poll [DEVICE]      DEVICE: model-mlx5 (default), model-e810, or an RDMA device
 *
 * Build: cc -o poll poll.c $(pkg-config --cflags --libs dvcq)   (see Makefile)
 */
#include <dvcq.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define CHECK(call)                                                                         \
    do {                                                                                    \
        int rc_ = (call);                                                                   \
        if (rc_ < 0) {                                                                      \
            fprintf(stderr, "poll: %s = %d: %s\n", #call, rc_, dvcq_last_error());          \
            return 1;                                                                       \
        }                                                                                   \
    } while (0)

static const char *opcode_name(uint32_t op)
{
    switch (op) {
    case DVCQ_WC_SEND: return "SEND";
    case DVCQ_WC_RDMA_WRITE: return "RDMA_WRITE";
    case DVCQ_WC_RDMA_READ: return "RDMA_READ";
    case DVCQ_WC_RECV: return "RECV";
    case DVCQ_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: return "other";
    }
}

static void print_wc(const struct dvcq_wc *wc)
{
    if (wc->wc_flags & DVCQ_WC_FAULT) {
        printf("wc fault kind=%u position=%llu value=0x%x\n", wc->vendor_err, (unsigned long long)wc->wr_id,
               wc->qp_num);
        return;
    }
    printf("wc wr_id=%llu status=%u opcode=%u (%s) byte_len=%u qp_num=0x%x\n", (unsigned long long)wc->wr_id,
           wc->status, wc->opcode, opcode_name(wc->opcode), wc->byte_len, wc->qp_num);
}

int main(int argc, char **argv)
{
    const char *device = argc > 1 ? argv[1] : "model-mlx5";
    struct dvcq_context *ctx;
    struct dvcq_channel *ch;
    struct dvcq_cq *cq;
    struct dvcq_pd *pd;
    struct dvcq_mr *mr;
    struct dvcq_qp *qp;
    struct dvcq_wc wc[16];
    struct dvcq_cq_stats st;
    struct dvcq_cqe_view view[4];
    char reason[256], written[9] = {0}, received[9] = {0};
    int n, got = 0, errors = 0, i, rc;

    if (dvcq_abi_version() != DVCQ_ABI_VERSION) {
        fprintf(stderr, "poll: built against ABI %d, libdvcq has %u\n", DVCQ_ABI_VERSION, dvcq_abi_version());
        return 1;
    }
    printf("dvcq abi %u, %s\n", dvcq_abi_version(), dvcq_version());

    CHECK(dvcq_context_open(device, &ctx));
    CHECK(dvcq_channel_create(ctx, &ch));
    CHECK(dvcq_cq_create(ctx, 64, ch, &cq));
    CHECK(dvcq_pd_alloc(ctx, &pd));
    CHECK(dvcq_mr_reg(pd, 4096, &mr));
    CHECK(dvcq_qp_create_rc(pd, cq, &qp));
    CHECK(dvcq_qp_connect(qp, qp));
    CHECK(dvcq_cq_backend_reason(cq, reason, sizeof(reason)));
    printf("device %s: backend %s (%s)\n", device, dvcq_backend_name(dvcq_cq_backend(cq)), reason);

    /* An RDMA WRITE of "dvcq!!!!" from offset 0 to offset 64, polled. */
    CHECK(dvcq_mr_write(mr, 0, "dvcq!!!!", 8));
    CHECK(dvcq_qp_post_write(qp, 7, mr, 0, 8, mr, 64));
    for (i = 0; i < 1000000 && got == 0; i++) {
        CHECK(n = dvcq_cq_poll(cq, 16, wc));
        got = n;
    }
    if (got != 1) {
        fprintf(stderr, "poll: the write's completion did not come (%d)\n", got);
        return 1;
    }
    print_wc(&wc[0]);
    errors += wc[0].status != DVCQ_WC_SUCCESS;

    /* A SEND to a receive posted at offset 128, waited for in event mode. */
    CHECK(dvcq_qp_post_recv(qp, 8, mr, 128, 64));
    CHECK(dvcq_qp_post_send(qp, 9, mr, 64, 8));
    while (got < 3) {
        CHECK(n = dvcq_cq_wait(cq, 16, wc, 5000));
        if (n == 0) {
            fprintf(stderr, "poll: no completion within 5 s\n");
            return 1;
        }
        for (i = 0; i < n; i++) {
            print_wc(&wc[i]);
            errors += wc[i].status != DVCQ_WC_SUCCESS;
        }
        got += n;
    }

    CHECK(dvcq_mr_read(mr, 64, written, 8));
    CHECK(dvcq_mr_read(mr, 128, received, 8));
    printf("data: written \"%s\" received \"%s\"\n", written, received);

    CHECK(dvcq_cq_stats(cq, &st, sizeof(st)));
    printf("stats: polls=%llu completions=%llu errors=%llu faults=%llu events=%lld\n", (unsigned long long)st.polls,
           (unsigned long long)st.completions, (unsigned long long)st.errors, (unsigned long long)st.faults,
           (long long)dvcq_cq_events_taken(cq));

    /* Raw views exist where the backend walks its ring without a poll's bookkeeping. */
    rc = dvcq_cq_views(cq, 4, view);
    if (rc < 0)
        printf("views: %s (%d)\n", rc == -EOPNOTSUPP ? "not on this backend" : "failed", rc);
    else
        printf("views: %d entries\n", rc);

    /* The error convention: a negative errno, and a message for this thread. */
    rc = dvcq_cq_poll(NULL, 1, wc);
    printf("errors: dvcq_cq_poll(NULL) = %d (%s): %s\n", rc, rc == -EINVAL ? "-EINVAL" : "?", dvcq_last_error());

    CHECK(dvcq_qp_destroy(qp));
    CHECK(dvcq_mr_dereg(mr));
    CHECK(dvcq_pd_free(pd));
    CHECK(dvcq_cq_destroy(cq));
    CHECK(dvcq_channel_destroy(ch));
    CHECK(dvcq_context_close(ctx));

    if (errors || strcmp(written, "dvcq!!!!") || strcmp(received, "dvcq!!!!")) {
        fprintf(stderr, "poll: %d error completions, or the data did not land\n", errors);
        return 1;
    }
    printf("ok: %d completions on %s\n", got, device);
    return 0;
}
