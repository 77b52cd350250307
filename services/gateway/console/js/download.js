// Downloads through fetch: the API key goes in a header, which a plain link cannot send, so the
// bytes are fetched, held as a blob and saved through a temporary `<a download>`.

export async function fetchBlob(api, path) {
  const response = await api.fetch('GET', path);
  return response.blob();
}

export async function saveAs(api, path, filename) {
  const url = URL.createObjectURL(await fetchBlob(api, path));
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}
