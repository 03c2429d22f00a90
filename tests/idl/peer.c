/* C peer for the idl interop tests, built at test time with idlc + gcc.
 *
 *   peer write <domain> <topic> <count>   wait for a reader, write samples 0..count-1
 *   peer read  <domain> <topic> <count>   print "READY", then one JSON line per sample
 *
 * Sample i has values derived from i exactly as tests/test_idl_interop.py
 * expects them (expected_sample). Cyclone reads CYCLONEDDS_URI from the
 * environment, so the peer stays on the loopback interface the tests pin.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include "dds/dds.h"
#include "interop.h"

static void die(const char *what, dds_return_t rc)
{
  fprintf(stderr, "peer: %s: %s\n", what, dds_strretcode(rc));
  exit(2);
}

static void fill(interop_Sample *s, int i)
{
  memset(s, 0, sizeof(*s));
  s->id.site = (int16_t)(i % 3 - 1);
  s->id.num = 4000000000u + (uint32_t)i;
  snprintf(s->kind, sizeof(s->kind), "k%d", i);
  snprintf(s->label, sizeof(s->label), "label-%d", i);
  char note[64];
  snprintf(note, sizeof(note), "h\xc3\xa9llo \"%d\"", i);
  s->note = dds_string_dup(note);
  s->color = (interop_Color)(i % 3);
  s->pos.x = i + 0.5;
  s->pos.y = -i * 0.25;
  uint32_t nv = (uint32_t)(i % 9);
  s->values._length = s->values._maximum = nv;
  s->values._buffer = dds_sequence_float_allocbuf(nv > 0 ? nv : 1);
  s->values._release = true;
  for (uint32_t k = 0; k < nv; k++) s->values._buffer[k] = (float)(i * 0.5 + k);
  uint32_t nb = (uint32_t)(i * 3);
  s->blob._length = s->blob._maximum = nb;
  s->blob._buffer = dds_sequence_octet_allocbuf(nb > 0 ? nb : 1);
  s->blob._release = true;
  for (uint32_t k = 0; k < nb; k++) s->blob._buffer[k] = (uint8_t)((i + k) % 256);
  uint32_t np = (uint32_t)(i % 3);
  s->path._length = s->path._maximum = np;
  s->path._buffer = dds_sequence_interop_Point_allocbuf(np > 0 ? np : 1);
  s->path._release = true;
  for (uint32_t k = 0; k < np; k++) { s->path._buffer[k].x = k; s->path._buffer[k].y = -(double)k; }
  for (int r = 0; r < 2; r++)
    for (int c = 0; c < 3; c++) s->matrix[r][c] = i * 100 + r * 10 + c;
  s->c = (char)('a' + i);
  s->flag = (i % 2) == 0;
  s->i8 = (int8_t)(-100 + i);
  s->u8 = (uint8_t)(200 + i);
  s->u16 = (uint16_t)(60000 + i);
  s->i64 = INT64_MIN / 2 + i;
  s->u64 = (UINT64_C(1) << 63) + (uint64_t)i;
}

static void print_str(const char *s)
{
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else putchar(*s);
  }
  putchar('"');
}

static void print_sample(const interop_Sample *s)
{
  printf("{\"id\": {\"site\": %d, \"num\": %" PRIu32 "}, \"kind\": ", s->id.site, s->id.num);
  print_str(s->kind);
  printf(", \"label\": ");
  print_str(s->label);
  printf(", \"note\": ");
  print_str(s->note);
  printf(", \"color\": %d, \"pos\": {\"x\": %.17g, \"y\": %.17g}, \"values\": [",
         (int)s->color, s->pos.x, s->pos.y);
  for (uint32_t k = 0; k < s->values._length; k++)
    printf("%s%.9g", k ? ", " : "", s->values._buffer[k]);
  printf("], \"blob\": [");
  for (uint32_t k = 0; k < s->blob._length; k++)
    printf("%s%u", k ? ", " : "", s->blob._buffer[k]);
  printf("], \"path\": [");
  for (uint32_t k = 0; k < s->path._length; k++)
    printf("%s{\"x\": %.17g, \"y\": %.17g}", k ? ", " : "", s->path._buffer[k].x, s->path._buffer[k].y);
  printf("], \"matrix\": [[%d, %d, %d], [%d, %d, %d]]",
         s->matrix[0][0], s->matrix[0][1], s->matrix[0][2],
         s->matrix[1][0], s->matrix[1][1], s->matrix[1][2]);
  printf(", \"c\": \"%c\", \"flag\": %s, \"i8\": %d, \"u8\": %u, \"u16\": %u"
         ", \"i64\": %" PRId64 ", \"u64\": %" PRIu64 "}\n",
         s->c, s->flag ? "true" : "false", s->i8, s->u8, s->u16, s->i64, s->u64);
  fflush(stdout);
}

int main(int argc, char **argv)
{
  if (argc != 5) {
    fprintf(stderr, "usage: peer read|write DOMAIN TOPIC COUNT\n");
    return 1;
  }
  const int writing = strcmp(argv[1], "write") == 0;
  const dds_domainid_t domain = (dds_domainid_t)atoi(argv[2]);
  const int count = atoi(argv[4]);
  dds_return_t rc;

  dds_entity_t pp = dds_create_participant(domain, NULL, NULL);
  if (pp < 0) die("create participant", pp);
  dds_entity_t tp = dds_create_topic(pp, &interop_Sample_desc, argv[3], NULL, NULL);
  if (tp < 0) die("create topic", tp);
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(10));
  dds_qset_history(qos, DDS_HISTORY_KEEP_ALL, 0);

  if (writing) {
    dds_entity_t wr = dds_create_writer(pp, tp, qos, NULL);
    if (wr < 0) die("create writer", wr);
    if ((rc = dds_set_status_mask(wr, DDS_PUBLICATION_MATCHED_STATUS)) < 0) die("status mask", rc);
    dds_publication_matched_status_t st = {0};
    dds_time_t deadline = dds_time() + DDS_SECS(20);
    while (st.current_count == 0) {
      if (dds_time() > deadline) { fprintf(stderr, "peer: no reader matched\n"); return 3; }
      if ((rc = dds_get_publication_matched_status(wr, &st)) < 0) die("matched status", rc);
      if (st.current_count == 0) dds_sleepfor(DDS_MSECS(10));
    }
    for (int i = 0; i < count; i++) {
      interop_Sample s;
      fill(&s, i);
      if ((rc = dds_write(wr, &s)) < 0) die("write", rc);
      interop_Sample_free(&s, DDS_FREE_CONTENTS);
    }
    if ((rc = dds_wait_for_acks(wr, DDS_SECS(20))) < 0) die("wait for acks", rc);
    printf("WROTE %d\n", count);
    fflush(stdout);
  } else {
    dds_entity_t rd = dds_create_reader(pp, tp, qos, NULL);
    if (rd < 0) die("create reader", rd);
    dds_entity_t ws = dds_create_waitset(pp);
    dds_entity_t rc_cond = dds_create_readcondition(rd, DDS_ANY_STATE);
    dds_waitset_attach(ws, rc_cond, 0);
    printf("READY\n");
    fflush(stdout);
    int got = 0;
    dds_time_t deadline = dds_time() + DDS_SECS(20);
    while (got < count) {
      if (dds_time() > deadline) { fprintf(stderr, "peer: timed out after %d samples\n", got); return 3; }
      dds_waitset_wait(ws, NULL, 0, DDS_MSECS(100));
      void *samples[16] = {0};
      dds_sample_info_t infos[16];
      int n = dds_take(rd, samples, infos, 16, 16);
      if (n < 0) die("take", n);
      for (int k = 0; k < n; k++)
        if (infos[k].valid_data) { print_sample((interop_Sample *)samples[k]); got++; }
      if (n > 0) dds_return_loan(rd, samples, n);
    }
  }
  dds_delete_qos(qos);
  dds_delete(pp);
  return 0;
}
