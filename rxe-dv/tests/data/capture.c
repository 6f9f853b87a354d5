/*
 * The program that captured rxe-linux-6.1-rdma-core-44.txt (see the comment at its top).
 * Built on the host against rdma-core 44 (gcc -O2 -o capture capture.c -libverbs) and run
 * in a soft-RoCE qemu guest like the one tests/vm/run boots, after `rdma link add rxe0`; its
 * "rxe-" lines on the console, less rxe-map, are the capture. It reads rdma-core's private
 * struct rxe_cq at the offsets of dvcq's layout table (uapi/src/rxe/cq_layout.rs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include <time.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define DIE(...) do{printf("rxe-fail " __VA_ARGS__);printf("\n");exit(1);}while(0)

int main(void){
  int n; struct ibv_device **l=ibv_get_device_list(&n); if(!l||!n) DIE("no device");
  struct ibv_context *ctx=ibv_open_device(l[0]); if(!ctx) DIE("open");
  struct ibv_pd *pd=ibv_alloc_pd(ctx);
  char *buf=aligned_alloc(4096, 8192); memset(buf,0x5a,8192);
  struct ibv_mr *mr=ibv_reg_mr(pd,buf,8192,IBV_ACCESS_LOCAL_WRITE|IBV_ACCESS_REMOTE_WRITE|IBV_ACCESS_REMOTE_READ);
  if(!mr) DIE("mr");
  struct ibv_cq *cq=ibv_create_cq(ctx,16,NULL,NULL,0); if(!cq) DIE("cq");
  unsigned char s[344]; memcpy(s,cq,344);
  uint64_t moff,q,wcsz; uint32_t msz; int32_t cqe; uint32_t handle;
  memcpy(&cqe,s+28,4); memcpy(&handle,s+24,4); memcpy(&moff,s+288,8); memcpy(&msz,s+296,4); memcpy(&q,s+304,8); memcpy(&wcsz,s+328,8);
  printf("rxe-cq cqe=%d ibv_cq.cqe=%d handle=%u mmap_offset=%#lx mmap_size=%u queue=%#lx wc_size=%lu\n",cqe,cq->cqe,handle,moff,msz,q,wcsz);
  printf("rxe-struct "); for(int k=0;k<344;k++) printf("%02x",s[k]); printf("\n");
  volatile uint32_t *h=(volatile uint32_t*)q;
  printf("rxe-hdr log2_elem_size=%u index_mask=%u producer=%u consumer=%u\n",h[0],h[1],h[32],h[64]);
  FILE *f=fopen("/proc/self/maps","r"); char line[512]; while(fgets(line,sizeof line,f)){ unsigned long a,b; if(sscanf(line,"%lx-%lx",&a,&b)==2 && a==q) printf("rxe-map %s",line);} fclose(f);
  struct ibv_qp_init_attr ia={.send_cq=cq,.recv_cq=cq,.cap={.max_send_wr=16,.max_recv_wr=16,.max_send_sge=1,.max_recv_sge=1},.qp_type=IBV_QPT_RC};
  struct ibv_qp *qp=ibv_create_qp(pd,&ia); if(!qp) DIE("qp");
  union ibv_gid gid; if(ibv_query_gid(ctx,1,1,&gid)) DIE("gid");
  struct ibv_qp_attr a={.qp_state=IBV_QPS_INIT,.port_num=1,.pkey_index=0,.qp_access_flags=IBV_ACCESS_REMOTE_WRITE|IBV_ACCESS_REMOTE_READ};
  if(ibv_modify_qp(qp,&a,IBV_QP_STATE|IBV_QP_PKEY_INDEX|IBV_QP_PORT|IBV_QP_ACCESS_FLAGS)) DIE("init");
  memset(&a,0,sizeof a); a.qp_state=IBV_QPS_RTR; a.path_mtu=IBV_MTU_1024; a.dest_qp_num=qp->qp_num; a.rq_psn=0; a.max_dest_rd_atomic=1; a.min_rnr_timer=12;
  a.ah_attr.is_global=1; a.ah_attr.grh.dgid=gid; a.ah_attr.grh.sgid_index=1; a.ah_attr.grh.hop_limit=1; a.ah_attr.port_num=1;
  if(ibv_modify_qp(qp,&a,IBV_QP_STATE|IBV_QP_AV|IBV_QP_PATH_MTU|IBV_QP_DEST_QPN|IBV_QP_RQ_PSN|IBV_QP_MAX_DEST_RD_ATOMIC|IBV_QP_MIN_RNR_TIMER)) DIE("rtr");
  memset(&a,0,sizeof a); a.qp_state=IBV_QPS_RTS; a.timeout=14; a.retry_cnt=7; a.rnr_retry=7; a.sq_psn=0; a.max_rd_atomic=1;
  if(ibv_modify_qp(qp,&a,IBV_QP_STATE|IBV_QP_TIMEOUT|IBV_QP_RETRY_CNT|IBV_QP_RNR_RETRY|IBV_QP_SQ_PSN|IBV_QP_MAX_QP_RD_ATOMIC)) DIE("rts");
  printf("rxe-qp qp_num=%u\n",qp->qp_num);
  struct ibv_recv_wr *brw; struct ibv_send_wr *bsw;
  for(int i=0;i<5;i++){ struct ibv_sge g={.addr=(uintptr_t)buf+4096+i*256,.length=256,.lkey=mr->lkey}; struct ibv_recv_wr r={.wr_id=0x100+i,.sg_list=&g,.num_sge=1}; if(ibv_post_recv(qp,&r,&brw)) DIE("recv"); }
  struct ibv_sge g={.addr=(uintptr_t)buf,.length=64,.lkey=mr->lkey};
  struct ibv_send_wr w[5]; memset(w,0,sizeof w);
  w[0].wr_id=0x200; w[0].opcode=IBV_WR_SEND; w[0].send_flags=IBV_SEND_SIGNALED; w[0].sg_list=&g; w[0].num_sge=1;
  w[1].wr_id=0x201; w[1].opcode=IBV_WR_SEND_WITH_IMM; w[1].imm_data=htonl(0x11223344); w[1].send_flags=IBV_SEND_SIGNALED; w[1].sg_list=&g; w[1].num_sge=1;
  w[2].wr_id=0x202; w[2].opcode=IBV_WR_RDMA_WRITE_WITH_IMM; w[2].imm_data=htonl(0xa0b0c0d0); w[2].send_flags=IBV_SEND_SIGNALED; w[2].sg_list=&g; w[2].num_sge=1; w[2].wr.rdma.remote_addr=(uintptr_t)buf+2048; w[2].wr.rdma.rkey=mr->rkey;
  w[3].wr_id=0x203; w[3].opcode=IBV_WR_RDMA_WRITE; w[3].send_flags=IBV_SEND_SIGNALED; w[3].sg_list=&g; w[3].num_sge=1; w[3].wr.rdma.remote_addr=(uintptr_t)buf+2048; w[3].wr.rdma.rkey=mr->rkey;
  w[4].wr_id=0x204; w[4].opcode=IBV_WR_RDMA_READ; w[4].send_flags=IBV_SEND_SIGNALED; w[4].sg_list=&g; w[4].num_sge=1; w[4].wr.rdma.remote_addr=(uintptr_t)buf+2048; w[4].wr.rdma.rkey=mr->rkey;
  for(int i=0;i<5;i++){ if(ibv_post_send(qp,&w[i],&bsw)) DIE("send %d",i); }
  double t=now(); while(((h[32]-h[64])&h[1])<8 && now()-t<10) usleep(1000);
  /* an error: a send whose lkey is wrong; the QP goes to error and flushes what is left */
  struct ibv_sge bad={.addr=(uintptr_t)buf,.length=64,.lkey=mr->lkey^0x55};
  struct ibv_send_wr e={.wr_id=0x2ee,.opcode=IBV_WR_SEND,.send_flags=IBV_SEND_SIGNALED,.sg_list=&bad,.num_sge=1};
  if(ibv_post_send(qp,&e,&bsw)) DIE("bad send");
  uint32_t last=0; t=now(); double stable=now();
  while(now()-t<10){ uint32_t c=(h[32]-h[64])&h[1]; if(c!=last){last=c;stable=now();} if(now()-stable>0.5) break; usleep(1000);}
  printf("rxe-hdr log2_elem_size=%u index_mask=%u producer=%u consumer=%u\n",h[0],h[1],h[32],h[64]);
  const unsigned char *m=(const unsigned char*)q;
  for(uint32_t off=0; off<msz; off+=64){ int z=1; for(int k=0;k<64;k++) if(m[off+k]) z=0; if(z) continue; printf("rxe-mem %u ",off); for(int k=0;k<64;k++) printf("%02x",m[off+k]); printf("\n"); }
  struct ibv_wc wc[32]; int got=ibv_poll_cq(cq,32,wc);
  for(int i=0;i<got;i++) printf("rxe-wc wr_id=%#lx status=%u opcode=%u vendor_err=%#x byte_len=%u imm_data=%#x qp_num=%u src_qp=%u wc_flags=%#x pkey_index=%u slid=%u sl=%u dlid_path_bits=%u\n",
     wc[i].wr_id,wc[i].status,wc[i].opcode,wc[i].vendor_err,wc[i].byte_len,wc[i].imm_data,wc[i].qp_num,wc[i].src_qp,wc[i].wc_flags,wc[i].pkey_index,wc[i].slid,wc[i].sl,wc[i].dlid_path_bits);
  printf("rxe-hdr log2_elem_size=%u index_mask=%u producer=%u consumer=%u\n",h[0],h[1],h[32],h[64]);
  printf("rxe-done polled=%d\n",got);
  return 0;
}
