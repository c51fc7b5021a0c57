/* dg_json_got.c — see dg_json_got.h. */
#include "dg_json_got.h"

#include <stdio.h>

void dg_json_got(const cJSON *v, char *buf, size_t len) {
    if (!v) snprintf(buf, len, "it is missing");
    else if (cJSON_IsNumber(v)) snprintf(buf, len, "got %.15g", v->valuedouble);
    else if (cJSON_IsString(v)) snprintf(buf, len, "got the string \"%.40s\"", v->valuestring);
    else if (cJSON_IsBool(v)) snprintf(buf, len, "got %s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v)) snprintf(buf, len, "got null");
    else if (cJSON_IsArray(v)) snprintf(buf, len, "got an array");
    else snprintf(buf, len, "got an object");
}
