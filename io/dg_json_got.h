/* dg_json_got.h — what a JSON value is, for the one-line refusals of the
 * readers that check a document field by field (traces, device profiles):
 * "...: ts: expected a number, got the string "12.5"". */
#ifndef DG_JSON_GOT_H
#define DG_JSON_GOT_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* "got 1e+300", "got the string "abc"" (cut at 40 bytes), "got an object",
 * "got null", ...; "it is missing" for v NULL. */
void dg_json_got(const cJSON *v, char *buf, size_t len);

#endif /* DG_JSON_GOT_H */
