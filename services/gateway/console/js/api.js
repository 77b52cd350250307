// The HTTP API seen from the browser: every call carries the API key in the Authorization
// header (never in a URL), and every error becomes an ApiError with the API's code and message.

const KEY_SLOT = 'soong.apiKey';

/** The key of this browser tab (sessionStorage: gone when the tab closes). */
export function savedKey() {
  return sessionStorage.getItem(KEY_SLOT);
}

export function saveKey(key) {
  sessionStorage.setItem(KEY_SLOT, key);
}

export function forgetKey() {
  sessionStorage.removeItem(KEY_SLOT);
}

/** An answer that was not 2xx, or a request that never got one (status 0). */
export class ApiError extends Error {
  constructor(status, code, message, details = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

async function errorOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch {
    // not the API's JSON error body (a proxy's page, a cut connection): keep the status only
  }
  const error = body && body.error;
  if (error && typeof error.code === 'string') {
    return new ApiError(response.status, error.code, error.message || error.code, error.details || {});
  }
  return new ApiError(response.status, `http_${response.status}`, response.statusText || 'request failed');
}

/** A path with its query string; null and undefined parameters are left out. */
export function withQuery(path, params = {}) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined) query.set(name, String(value));
  }
  const text = query.toString();
  return text ? `${path}?${text}` : path;
}

/** The path of a session's resource, each part escaped: `sessionPath(id, 'runs', runId)`. */
export function sessionPath(sessionId, ...parts) {
  return `/v1/sessions/${[sessionId, ...parts].map(encodeURIComponent).join('/')}`;
}

/** A workspace path for a URL: each segment escaped, the slashes kept. */
export function filePath(path) {
  return path.split('/').map(encodeURIComponent).join('/');
}

export class Api {
  /** `onUnauthorized` is called once a request answers 401 (the key was revoked or is wrong). */
  constructor(key, { onUnauthorized = () => {} } = {}) {
    this.key = key;
    this.onUnauthorized = onUnauthorized;
  }

  /** The raw Response of a request (2xx only); `json` is sent as the JSON body. */
  async fetch(method, path, { json, body, headers = {}, signal } = {}) {
    const all = { Authorization: `Bearer ${this.key}`, ...headers };
    if (json !== undefined) {
      all['Content-Type'] = 'application/json';
      body = JSON.stringify(json);
    }
    let response;
    try {
      response = await fetch(path, { method, headers: all, body, signal, cache: 'no-store' });
    } catch (err) {
      if (err.name === 'AbortError') throw err;
      throw new ApiError(0, 'network_error', 'the gateway could not be reached');
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401) this.onUnauthorized(error);
      throw error;
    }
    return response;
  }

  /** The parsed JSON answer of a request. */
  async request(method, path, options) {
    const response = await this.fetch(method, path, options);
    return response.status === 204 ? null : response.json();
  }

  get(path, options) {
    return this.request('GET', path, options);
  }

  post(path, json, options = {}) {
    return this.request('POST', path, { ...options, json });
  }

  patch(path, json, options = {}) {
    return this.request('PATCH', path, { ...options, json });
  }
}
