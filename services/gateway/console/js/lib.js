// The console's one door to its vendored libraries: Preact, its hooks, and htm for templates
// (tagged template literals instead of JSX, so there is nothing to build).
import { Component, createRef, h, render } from 'preact';
import {
  useCallback, useEffect, useLayoutEffect, useMemo, useReducer, useRef, useState,
} from 'preact/hooks';
import htm from 'htm';

export const html = htm.bind(h);
export {
  Component, createRef, render, useCallback, useEffect, useLayoutEffect, useMemo, useReducer, useRef, useState,
};
