/* C peer on Debian's Cyclone DDS for the writer-loss tests (sensors::Reading).
 *
 *   lifecycle_peer read  <domain> <topic>
 *       reliable KEEP_ALL reader: prints "READY", then one JSON line per sample taken:
 *       {"sensor": 1, "value": 1.0, "valid": true, "state": "ALIVE", "writers": 1}
 *       ("writers": the reader's matched-publication count when it took the sample),
 *       and {"matched": N} whenever that count changes
 *   lifecycle_peer write <domain> <topic> <autodispose 0|1> <lease ms>
 *       reliable KEEP_ALL writer with AUTOMATIC liveliness: prints "READY", then runs
 *       one command per stdin line and answers "OK" (or "ERR ..."):
 *       match N | write SENSOR VALUE | dispose SENSOR | unregister SENSOR | close | exit
 *
 * Built by tests/support/c_peers.py with idlc + gcc; Cyclone reads CYCLONEDDS_URI
 * from the environment, so the peer stays on the loopback interface the tests pin.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dds/dds.h"
#include "reading.h"

static void die(const char *what, dds_return_t rc)
{
  fprintf(stderr, "lifecycle_peer: %s: %s\n", what, dds_strretcode(rc));
  exit(2);
}

static const char *state_name(dds_instance_state_t s)
{
  switch (s) {
    case DDS_IST_ALIVE: return "ALIVE";
    case DDS_IST_NOT_ALIVE_DISPOSED: return "NOT_ALIVE_DISPOSED";
    case DDS_IST_NOT_ALIVE_NO_WRITERS: return "NOT_ALIVE_NO_WRITERS";
  }
  return "?";
}

static dds_entity_t make_topic(dds_entity_t pp, const char *name)
{
  dds_entity_t tp = dds_create_topic(pp, &sensors_Reading_desc, name, NULL, NULL);
  if (tp < 0) die("create topic", tp);
  return tp;
}

static int do_read(dds_entity_t pp, const char *topic)
{
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(10));
  dds_qset_history(qos, DDS_HISTORY_KEEP_ALL, 0);
  dds_entity_t rd = dds_create_reader(pp, make_topic(pp, topic), qos, NULL);
  dds_delete_qos(qos);
  if (rd < 0) die("create reader", rd);
  dds_entity_t ws = dds_create_waitset(pp);
  dds_entity_t cond = dds_create_readcondition(rd, DDS_ANY_STATE);
  dds_waitset_attach(ws, cond, 0);
  printf("READY\n");
  fflush(stdout);
  uint32_t was_matched = 0;
  for (;;) {
    dds_waitset_wait(ws, NULL, 0, DDS_MSECS(50));
    void *samples[16] = {NULL};
    dds_sample_info_t infos[16];
    dds_return_t n = dds_take(rd, samples, infos, 16, 16);
    if (n < 0) die("take", n);
    dds_subscription_matched_status_t matched;
    dds_get_subscription_matched_status(rd, &matched);
    if (matched.current_count != was_matched) {
      was_matched = matched.current_count;
      printf("{\"matched\": %u}\n", (unsigned)was_matched);
      fflush(stdout);
    }
    for (int i = 0; i < n; i++) {
      const sensors_Reading *s = samples[i];
      /* an invalid sample (a dispose, an unregister) has its key fields set too */
      printf("{\"sensor\": %d, \"value\": %g, \"valid\": %s, \"state\": \"%s\", \"writers\": %u}\n",
             (int)s->sensor, infos[i].valid_data ? s->value : 0.0,
             infos[i].valid_data ? "true" : "false", state_name(infos[i].instance_state),
             (unsigned)matched.current_count);
    }
    if (n > 0) {
      fflush(stdout);
      dds_return_loan(rd, samples, n);
    }
  }
  return 0;
}

static int do_write(dds_entity_t pp, const char *topic, int autodispose, int lease_ms)
{
  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(10));
  dds_qset_history(qos, DDS_HISTORY_KEEP_ALL, 0);
  dds_qset_liveliness(qos, DDS_LIVELINESS_AUTOMATIC, DDS_MSECS(lease_ms));
  dds_qset_writer_data_lifecycle(qos, autodispose != 0);
  dds_entity_t wr = dds_create_writer(pp, make_topic(pp, topic), qos, NULL);
  dds_delete_qos(qos);
  if (wr < 0) die("create writer", wr);
  printf("READY\n");
  fflush(stdout);
  char line[256];
  while (fgets(line, sizeof(line), stdin) != NULL) {
    char cmd[32] = "";
    int sensor = 0;
    double value = 0.0;
    int got = sscanf(line, "%31s %d %lf", cmd, &sensor, &value);
    dds_return_t rc = DDS_RETCODE_OK;
    sensors_Reading s = {.sensor = sensor, .value = value, .label = ""};
    if (got < 1)
      continue;
    if (strcmp(cmd, "match") == 0) {
      dds_publication_matched_status_t st;
      dds_time_t deadline = dds_time() + DDS_SECS(20);
      do {
        rc = dds_get_publication_matched_status(wr, &st);
        if (rc == DDS_RETCODE_OK && st.current_count >= (uint32_t)sensor)
          break;
        dds_sleepfor(DDS_MSECS(10));
      } while (dds_time() < deadline);
      if (rc == DDS_RETCODE_OK && st.current_count < (uint32_t)sensor)
        rc = DDS_RETCODE_TIMEOUT;
    } else if (strcmp(cmd, "write") == 0) {
      rc = dds_write(wr, &s);
    } else if (strcmp(cmd, "dispose") == 0) {
      rc = dds_dispose(wr, &s);
    } else if (strcmp(cmd, "unregister") == 0) {
      rc = dds_unregister_instance(wr, &s);
    } else if (strcmp(cmd, "close") == 0) {
      rc = dds_delete(wr);
    } else if (strcmp(cmd, "exit") == 0) {
      dds_delete(pp);
      printf("OK\n");
      fflush(stdout);
      return 0;
    } else {
      rc = DDS_RETCODE_BAD_PARAMETER;
    }
    if (rc == DDS_RETCODE_OK)
      printf("OK\n");
    else
      printf("ERR %s %s\n", cmd, dds_strretcode(rc));
    fflush(stdout);
  }
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 4) {
    fprintf(stderr, "usage: %s read|write DOMAIN TOPIC [AUTODISPOSE LEASE_MS]\n", argv[0]);
    return 1;
  }
  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[2]), NULL, NULL);
  if (pp < 0) die("create participant", pp);
  if (strcmp(argv[1], "read") == 0)
    return do_read(pp, argv[3]);
  if (strcmp(argv[1], "write") == 0 && argc >= 6)
    return do_write(pp, argv[3], atoi(argv[4]), atoi(argv[5]));
  fprintf(stderr, "%s: bad arguments\n", argv[0]);
  return 1;
}
