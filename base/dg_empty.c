/* Placeholder translation unit for a room that has no source yet. */
typedef int dg_empty_translation_unit;
