/* C writer on Debian's Cyclone DDS for the durability-service interop test (sensors::Reading).
 *
 *   durability_peer <domain> <topic> <transient|persistent> <sensors> <rounds> <readers>
 *
 * Creates a reliable KEEP_LAST(1) writer with TRANSIENT (or PERSISTENT) durability and a
 * DurabilityService QoS (KEEP_LAST 1 per instance, cleanup delay 0), waits until <readers>
 * readers matched it, writes <rounds> readings of each of <sensors> sensors (value = round,
 * label "c<sensor>"), waits until every matched reader acknowledged them, prints
 * "written <count>" and exits.
 *
 * Why wait for a match first: Cyclone DDS has no durability service of its own, and a
 * TRANSIENT writer is to Cyclone a TRANSIENT_LOCAL one: what it writes before a reader
 * matched reaches that reader only from the writer's own history, and only while the
 * writer lives. A writer that wants the dcps durability service to keep its data must
 * so wait for the service's reader (matched by the service after an XTypes type lookup
 * of this writer's type) before it writes, and for its acknowledgements before it exits.
 *
 * The writer keeps autodispose off: deleting it (at exit) then unregisters its
 * instances instead of disposing them, so the kept state arrives NOT_ALIVE_NO_WRITERS,
 * not NOT_ALIVE_DISPOSED.
 *
 * Built by tests/support/c_peers.py with idlc (WITH type information: the service looks
 * the type up over XTypes) + gcc; Cyclone reads CYCLONEDDS_URI from the environment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dds/dds.h"
#include "reading.h"

static void die(const char *what, dds_return_t rc)
{
  fprintf(stderr, "durability_peer: %s: %s\n", what, dds_strretcode(rc));
  exit(2);
}

int main(int argc, char **argv)
{
  if (argc < 7) {
    fprintf(stderr, "usage: %s DOMAIN TOPIC transient|persistent SENSORS ROUNDS READERS\n",
            argv[0]);
    return 1;
  }
  int sensors = atoi(argv[4]), rounds = atoi(argv[5]);
  uint32_t readers = (uint32_t)atoi(argv[6]);
  dds_durability_kind_t kind =
      strcmp(argv[3], "persistent") == 0 ? DDS_DURABILITY_PERSISTENT : DDS_DURABILITY_TRANSIENT;
  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
  if (pp < 0) die("create participant", pp);
  dds_entity_t tp = dds_create_topic(pp, &sensors_Reading_desc, argv[2], NULL, NULL);
  if (tp < 0) die("create topic", tp);

  dds_qos_t *qos = dds_create_qos();
  dds_qset_reliability(qos, DDS_RELIABILITY_RELIABLE, DDS_SECS(10));
  dds_qset_history(qos, DDS_HISTORY_KEEP_LAST, 1);
  dds_qset_durability(qos, kind);
  dds_qset_durability_service(qos, 0, DDS_HISTORY_KEEP_LAST, 1, DDS_LENGTH_UNLIMITED,
                              DDS_LENGTH_UNLIMITED, DDS_LENGTH_UNLIMITED);
  dds_qset_writer_data_lifecycle(qos, false);
  dds_entity_t wr = dds_create_writer(pp, tp, qos, NULL);
  dds_delete_qos(qos);
  if (wr < 0) die("create writer", wr);

  dds_publication_matched_status_t st = {0};
  dds_time_t deadline = dds_time() + DDS_SECS(30);
  while (dds_get_publication_matched_status(wr, &st) == DDS_RETCODE_OK &&
         st.current_count < readers && dds_time() < deadline)
    dds_sleepfor(DDS_MSECS(10));
  if (st.current_count < readers) die("waiting for the service's reader", DDS_RETCODE_TIMEOUT);

  int written = 0;
  for (int r = 0; r < rounds; r++) {
    for (int s = 0; s < sensors; s++) {
      sensors_Reading sample = {.sensor = s, .value = (double)r};
      snprintf(sample.label, sizeof(sample.label), "c%d", s);
      dds_return_t rc = dds_write(wr, &sample);
      if (rc != DDS_RETCODE_OK) die("write", rc);
      written++;
    }
  }
  dds_return_t rc = dds_wait_for_acks(wr, DDS_SECS(20));
  if (rc != DDS_RETCODE_OK) die("wait for acks", rc);
  printf("written %d\n", written);
  fflush(stdout);
  dds_delete(pp);
  return 0;
}
