// Helpers for holding back text that might still grow into a tag, so streamed output never depends on where
// the chunks were split.

/**
 * Length of the longest suffix of `text` that is a proper prefix of one of `markers` (0 if none): the part a
 * streaming parser must hold until the next chunk shows whether the marker really starts there.
 * @param text the unconsumed text
 * @param markers tags that may start in `text`
 */
export function partialMarkerSuffixLength(text: string, markers: readonly string[]): number {
  let best = 0;
  for (const marker of markers) {
    const maxLen = Math.min(marker.length - 1, text.length);
    for (let k = maxLen; k > best; k--) {
      if (text.endsWith(marker.slice(0, k))) {
        best = k;
        break;
      }
    }
  }
  return best;
}

/**
 * Index of the earliest occurrence of any of `markers` in `text` at or after `from`.
 * @returns `{ index, marker }` of the first match, or null
 */
export function findFirstMarker(text: string, markers: readonly string[], from = 0): { index: number; marker: string } | null {
  let best: { index: number; marker: string } | null = null;
  for (const marker of markers) {
    const i = text.indexOf(marker, from);
    if (i !== -1 && (best === null || i < best.index)) best = { index: i, marker };
  }
  return best;
}

/** Length of the trailing run of whitespace of `text`. */
export function trailingWhitespaceLength(text: string): number {
  let n = 0;
  while (n < text.length && /\s/.test(text[text.length - 1 - n])) n++;
  return n;
}
