/* Match probe built WITH type information: create a writer for one of the
 * types of typed.idl and report whether a (Python) reader matched.
 *
 *   match <domain> <topic> Sample|Evolving|Changing [wait-ms]   prints "matched=N"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dds/dds.h"
#include "typed.h"

int main(int argc, char **argv)
{
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: match DOMAIN TOPIC TYPE [WAIT-MS]\n");
    return 1;
  }
  const dds_topic_descriptor_t *desc =
    strcmp(argv[3], "Sample") == 0 ? &typed_Sample_desc :
    strcmp(argv[3], "Evolving") == 0 ? &typed_Evolving_desc : &typed_Changing_desc;
  dds_entity_t pp = dds_create_participant((dds_domainid_t)atoi(argv[1]), NULL, NULL);
  if (pp < 0) { fprintf(stderr, "match: participant: %s\n", dds_strretcode(pp)); return 2; }
  dds_entity_t tp = dds_create_topic(pp, desc, argv[2], NULL, NULL);
  if (tp < 0) { fprintf(stderr, "match: topic: %s\n", dds_strretcode(tp)); return 2; }
  dds_entity_t wr = dds_create_writer(pp, tp, NULL, NULL);
  if (wr < 0) { fprintf(stderr, "match: writer: %s\n", dds_strretcode(wr)); return 2; }
  dds_publication_matched_status_t st = {0};
  dds_time_t deadline = dds_time() + DDS_MSECS(argc == 5 ? atoi(argv[4]) : 10000);
  while (st.current_count == 0 && dds_time() < deadline) {
    dds_get_publication_matched_status(wr, &st);
    if (st.current_count == 0) dds_sleepfor(DDS_MSECS(10));
  }
  printf("matched=%d\n", (int)st.current_count);
  dds_delete(pp);
  return 0;
}
