// A small RFC 4180 CSV reader for previews: quoted fields (with "" for a quote and line breaks
// inside), CRLF or LF line ends, and a cap on rows so a huge file cannot freeze the page.

/** Rows of `text` split on `delimiter`, at most `maxRows` of them. */
export function parseCsv(text, { delimiter = ',', maxRows = 200 } = {}) {
  const rows = [];
  let row = [];
  let field = '';
  let quoted = false;
  let i = 0;
  const endRow = () => {
    row.push(field);
    rows.push(row);
    row = [];
    field = '';
  };
  while (i < text.length && rows.length < maxRows) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i += 2; continue; }
      if (c === '"') { quoted = false; i += 1; continue; }
      field += c;
      i += 1;
      continue;
    }
    if (c === '"' && field === '') { quoted = true; i += 1; continue; }
    if (c === delimiter) { row.push(field); field = ''; i += 1; continue; }
    if (c === '\r' && text[i + 1] === '\n') { endRow(); i += 2; continue; }
    if (c === '\n' || c === '\r') { endRow(); i += 1; continue; }
    field += c;
    i += 1;
  }
  if (rows.length < maxRows && (field !== '' || row.length)) endRow();
  return rows;
}
