-- The five TPC-C transactions as PL/pgSQL functions, for `tpcc.py run --procedures`: each
-- transaction is one `SELECT tpcc_x(...)` round trip in autocommit, where the interactive mode
-- sends a statement per round trip. Each function runs the same statements as the interactive
-- code in tpcc.py (Terminal.tx_*), in the same order, with the same row locks, so the two modes
-- do the same work in the database and differ only in round trips. The shape follows HammerDB's
-- TPROC-C functions for PostgreSQL: scalar and array arguments, one small result. Variables are
-- prefixed p_ (arguments) and v_ (locals) so that none shares a name with a column.
-- `tpcc.py procedures` creates them; running it again replaces them.

-- New-Order (clause 2.4.2). The order lines come as three arrays of one length, already sorted
-- by item and supply warehouse by the driver, so that stock rows are locked in one global
-- order. An unused item number (1% of orders, clause 2.4.2.3) raises SQLSTATE TPC01, which
-- rolls the whole transaction back; the driver counts it as a completed, rolled-back order.
-- Returns the order's total amount, as the terminal would show it (2.4.3.3).
CREATE OR REPLACE FUNCTION tpcc_new_order(
    p_w_id integer, p_d_id integer, p_c_id integer,
    p_i_ids integer[], p_supply_w_ids integer[], p_quantities integer[])
RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE
    v_ol_cnt integer := array_length(p_i_ids, 1);
    v_all_local integer := 1;
    v_w_tax warehouse.w_tax%TYPE;
    v_d_tax district.d_tax%TYPE;
    v_o_id district.d_next_o_id%TYPE;
    v_c_discount customer.c_discount%TYPE;
    v_c_last customer.c_last%TYPE;
    v_c_credit customer.c_credit%TYPE;
    v_i_price item.i_price%TYPE;
    v_i_name item.i_name%TYPE;
    v_i_data item.i_data%TYPE;
    v_s_quantity stock.s_quantity%TYPE;
    v_s_data stock.s_data%TYPE;
    v_s_dist stock.s_dist_01%TYPE;
    v_remote integer;
    v_amount numeric;
    v_total numeric := 0;
    v_brand_generic text := '';
BEGIN
    FOR v_line IN 1 .. v_ol_cnt LOOP
        IF p_supply_w_ids[v_line] <> p_w_id THEN
            v_all_local := 0;
        END IF;
    END LOOP;
    SELECT w_tax INTO v_w_tax FROM warehouse WHERE w_id = p_w_id;
    SELECT d_tax, d_next_o_id INTO v_d_tax, v_o_id FROM district
        WHERE d_w_id = p_w_id AND d_id = p_d_id FOR UPDATE;
    UPDATE district SET d_next_o_id = d_next_o_id + 1
        WHERE d_w_id = p_w_id AND d_id = p_d_id;
    SELECT c_discount, c_last, c_credit INTO v_c_discount, v_c_last, v_c_credit FROM customer
        WHERE c_w_id = p_w_id AND c_d_id = p_d_id AND c_id = p_c_id;
    INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_carrier_id,
                        o_ol_cnt, o_all_local)
        VALUES (v_o_id, p_d_id, p_w_id, p_c_id, now(), NULL, v_ol_cnt, v_all_local);
    INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (v_o_id, p_d_id, p_w_id);
    FOR v_line IN 1 .. v_ol_cnt LOOP
        SELECT i_price, i_name, i_data INTO v_i_price, v_i_name, v_i_data FROM item
            WHERE i_id = p_i_ids[v_line];
        IF NOT FOUND THEN
            RAISE EXCEPTION 'Item number is not valid' USING ERRCODE = 'TPC01';
        END IF;
        SELECT s_quantity, s_data,
               CASE p_d_id WHEN 1 THEN s_dist_01 WHEN 2 THEN s_dist_02 WHEN 3 THEN s_dist_03
                           WHEN 4 THEN s_dist_04 WHEN 5 THEN s_dist_05 WHEN 6 THEN s_dist_06
                           WHEN 7 THEN s_dist_07 WHEN 8 THEN s_dist_08 WHEN 9 THEN s_dist_09
                           WHEN 10 THEN s_dist_10 END
            INTO v_s_quantity, v_s_data, v_s_dist FROM stock
            WHERE s_w_id = p_supply_w_ids[v_line] AND s_i_id = p_i_ids[v_line] FOR UPDATE;
        IF v_s_quantity >= p_quantities[v_line] + 10 THEN
            v_s_quantity := v_s_quantity - p_quantities[v_line];
        ELSE
            v_s_quantity := v_s_quantity - p_quantities[v_line] + 91;
        END IF;
        IF p_supply_w_ids[v_line] = p_w_id THEN
            v_remote := 0;
        ELSE
            v_remote := 1;
        END IF;
        UPDATE stock SET s_quantity = v_s_quantity, s_ytd = s_ytd + p_quantities[v_line],
                         s_order_cnt = s_order_cnt + 1, s_remote_cnt = s_remote_cnt + v_remote
            WHERE s_w_id = p_supply_w_ids[v_line] AND s_i_id = p_i_ids[v_line];
        v_amount := v_i_price * p_quantities[v_line];
        v_total := v_total + v_amount;
        -- Brand/generic (2.4.2.2) is only shown on the terminal, as in the interactive mode.
        IF v_i_data LIKE '%ORIGINAL%' AND v_s_data LIKE '%ORIGINAL%' THEN
            v_brand_generic := v_brand_generic || 'B';
        ELSE
            v_brand_generic := v_brand_generic || 'G';
        END IF;
        INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id,
                                ol_delivery_d, ol_quantity, ol_amount, ol_dist_info)
            VALUES (v_o_id, p_d_id, p_w_id, v_line, p_i_ids[v_line], p_supply_w_ids[v_line],
                    NULL, p_quantities[v_line], v_amount, v_s_dist);
    END LOOP;
    RETURN v_total * (1 - v_c_discount) * (1 + v_w_tax + v_d_tax);
END
$$;

-- Payment (clause 2.5.2). p_c_id is NULL when the customer is chosen by last name: then the
-- customer is the one at position ceil(n/2) of the n with that name ordered by C_FIRST
-- (2.5.2.2), found by counting them and skipping (n - 1) / 2. Returns the customer's C_ID.
CREATE OR REPLACE FUNCTION tpcc_payment(
    p_w_id integer, p_d_id integer, p_c_w_id integer, p_c_d_id integer,
    p_c_id integer, p_c_last text, p_h_amount numeric)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_c_id customer.c_id%TYPE := p_c_id;
    v_name_cnt integer;
    v_w_name warehouse.w_name%TYPE;
    v_w_street_1 warehouse.w_street_1%TYPE;
    v_w_street_2 warehouse.w_street_2%TYPE;
    v_w_city warehouse.w_city%TYPE;
    v_w_state warehouse.w_state%TYPE;
    v_w_zip warehouse.w_zip%TYPE;
    v_d_name district.d_name%TYPE;
    v_d_street_1 district.d_street_1%TYPE;
    v_d_street_2 district.d_street_2%TYPE;
    v_d_city district.d_city%TYPE;
    v_d_state district.d_state%TYPE;
    v_d_zip district.d_zip%TYPE;
    v_c_first customer.c_first%TYPE;
    v_c_middle customer.c_middle%TYPE;
    v_c_last customer.c_last%TYPE;
    v_c_street_1 customer.c_street_1%TYPE;
    v_c_street_2 customer.c_street_2%TYPE;
    v_c_city customer.c_city%TYPE;
    v_c_state customer.c_state%TYPE;
    v_c_zip customer.c_zip%TYPE;
    v_c_phone customer.c_phone%TYPE;
    v_c_since customer.c_since%TYPE;
    v_c_credit customer.c_credit%TYPE;
    v_c_credit_lim customer.c_credit_lim%TYPE;
    v_c_discount customer.c_discount%TYPE;
    v_c_balance customer.c_balance%TYPE;
    v_c_data customer.c_data%TYPE;
BEGIN
    UPDATE warehouse SET w_ytd = w_ytd + p_h_amount WHERE w_id = p_w_id;
    SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip
        INTO v_w_name, v_w_street_1, v_w_street_2, v_w_city, v_w_state, v_w_zip
        FROM warehouse WHERE w_id = p_w_id;
    UPDATE district SET d_ytd = d_ytd + p_h_amount WHERE d_w_id = p_w_id AND d_id = p_d_id;
    SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip
        INTO v_d_name, v_d_street_1, v_d_street_2, v_d_city, v_d_state, v_d_zip
        FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id;
    IF v_c_id IS NULL THEN
        SELECT count(*) INTO v_name_cnt FROM customer
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last;
        IF v_name_cnt = 0 THEN
            RAISE EXCEPTION 'no customer with c_last % in (%, %)', p_c_last, p_c_w_id, p_c_d_id
                USING ERRCODE = 'no_data_found';
        END IF;
        SELECT c_id INTO v_c_id FROM customer
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last
            ORDER BY c_first OFFSET (v_name_cnt - 1) / 2 LIMIT 1;
    END IF;
    SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip,
           c_phone, c_since, c_credit, c_credit_lim, c_discount, c_balance
        INTO v_c_first, v_c_middle, v_c_last, v_c_street_1, v_c_street_2, v_c_city,
             v_c_state, v_c_zip, v_c_phone, v_c_since, v_c_credit, v_c_credit_lim,
             v_c_discount, v_c_balance
        FROM customer WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id
        FOR UPDATE;
    IF v_c_credit = 'BC' THEN
        SELECT c_data INTO v_c_data FROM customer
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
        -- 2.5.2.2: the six values go in at the left, what falls off the right goes.
        v_c_data := substr(v_c_id || ' ' || p_c_d_id || ' ' || p_c_w_id || ' ' || p_d_id
                           || ' ' || p_w_id || ' ' || p_h_amount || ' ' || v_c_data, 1, 500);
        UPDATE customer SET c_balance = c_balance - p_h_amount,
                            c_ytd_payment = c_ytd_payment + p_h_amount,
                            c_payment_cnt = c_payment_cnt + 1, c_data = v_c_data
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
    ELSE
        UPDATE customer SET c_balance = c_balance - p_h_amount,
                            c_ytd_payment = c_ytd_payment + p_h_amount,
                            c_payment_cnt = c_payment_cnt + 1
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
    END IF;
    INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data)
        VALUES (v_c_id, p_c_d_id, p_c_w_id, p_d_id, p_w_id, now(), p_h_amount,
                v_w_name || '    ' || v_d_name);
    RETURN v_c_id;
END
$$;

-- Order-Status (clause 2.6.2). p_c_id is NULL when the customer is chosen by last name, as in
-- Payment. Reads the customer's latest order and its lines; returns the number of lines (0
-- when the customer has no order).
CREATE OR REPLACE FUNCTION tpcc_order_status(
    p_c_w_id integer, p_c_d_id integer, p_c_id integer, p_c_last text)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_c_id customer.c_id%TYPE := p_c_id;
    v_name_cnt integer;
    v_c_balance customer.c_balance%TYPE;
    v_c_first customer.c_first%TYPE;
    v_c_middle customer.c_middle%TYPE;
    v_c_last customer.c_last%TYPE;
    v_o_id orders.o_id%TYPE;
    v_o_entry_d orders.o_entry_d%TYPE;
    v_o_carrier_id orders.o_carrier_id%TYPE;
    v_ol record;
    v_ol_cnt integer := 0;
BEGIN
    IF v_c_id IS NULL THEN
        SELECT count(*) INTO v_name_cnt FROM customer
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last;
        IF v_name_cnt = 0 THEN
            RAISE EXCEPTION 'no customer with c_last % in (%, %)', p_c_last, p_c_w_id, p_c_d_id
                USING ERRCODE = 'no_data_found';
        END IF;
        SELECT c_id, c_balance, c_first, c_middle
            INTO v_c_id, v_c_balance, v_c_first, v_c_middle FROM customer
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_last = p_c_last
            ORDER BY c_first OFFSET (v_name_cnt - 1) / 2 LIMIT 1;
    ELSE
        SELECT c_balance, c_first, c_middle, c_last
            INTO v_c_balance, v_c_first, v_c_middle, v_c_last FROM customer
            WHERE c_w_id = p_c_w_id AND c_d_id = p_c_d_id AND c_id = v_c_id;
    END IF;
    SELECT o_id, o_entry_d, o_carrier_id INTO v_o_id, v_o_entry_d, v_o_carrier_id FROM orders
        WHERE o_w_id = p_c_w_id AND o_d_id = p_c_d_id AND o_c_id = v_c_id
        ORDER BY o_id DESC LIMIT 1;
    IF FOUND THEN
        FOR v_ol IN SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d
                    FROM order_line
                    WHERE ol_w_id = p_c_w_id AND ol_d_id = p_c_d_id AND ol_o_id = v_o_id LOOP
            v_ol_cnt := v_ol_cnt + 1;
        END LOOP;
    END IF;
    RETURN v_ol_cnt;
END
$$;

-- Delivery (clause 2.7.4), all ten districts in one transaction as in the interactive mode.
-- A district with no undelivered order is skipped (2.7.4.2); returns how many were.
CREATE OR REPLACE FUNCTION tpcc_delivery(p_w_id integer, p_o_carrier_id integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_o_id new_order.no_o_id%TYPE;
    v_c_id orders.o_c_id%TYPE;
    v_amount numeric;
    v_deleted integer;
    v_skipped integer := 0;
BEGIN
    FOR v_d_id IN 1 .. 10 LOOP
        SELECT no_o_id INTO v_o_id FROM new_order WHERE no_w_id = p_w_id AND no_d_id = v_d_id
            ORDER BY no_o_id LIMIT 1 FOR UPDATE;
        IF NOT FOUND THEN
            v_skipped := v_skipped + 1;
            CONTINUE;
        END IF;
        DELETE FROM new_order WHERE no_w_id = p_w_id AND no_d_id = v_d_id AND no_o_id = v_o_id;
        GET DIAGNOSTICS v_deleted = ROW_COUNT;
        IF v_deleted <> 1 THEN
            RAISE EXCEPTION 'Delivery: DELETE of new_order (%, %, %) removed % rows',
                p_w_id, v_d_id, v_o_id, v_deleted;
        END IF;
        SELECT o_c_id INTO v_c_id FROM orders
            WHERE o_w_id = p_w_id AND o_d_id = v_d_id AND o_id = v_o_id;
        UPDATE orders SET o_carrier_id = p_o_carrier_id
            WHERE o_w_id = p_w_id AND o_d_id = v_d_id AND o_id = v_o_id;
        UPDATE order_line SET ol_delivery_d = now()
            WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id;
        SELECT SUM(ol_amount) INTO v_amount FROM order_line
            WHERE ol_w_id = p_w_id AND ol_d_id = v_d_id AND ol_o_id = v_o_id;
        UPDATE customer SET c_balance = c_balance + v_amount,
                            c_delivery_cnt = c_delivery_cnt + 1
            WHERE c_w_id = p_w_id AND c_d_id = v_d_id AND c_id = v_c_id;
    END LOOP;
    RETURN v_skipped;
END
$$;

-- Stock-Level (clause 2.8.2): the number of distinct items of the district's last 20 orders
-- whose stock is below the threshold.
CREATE OR REPLACE FUNCTION tpcc_stock_level(p_w_id integer, p_d_id integer, p_threshold integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_next_o_id district.d_next_o_id%TYPE;
    v_low_stock integer;
BEGIN
    SELECT d_next_o_id INTO v_next_o_id FROM district WHERE d_w_id = p_w_id AND d_id = p_d_id;
    SELECT COUNT(DISTINCT s_i_id) INTO v_low_stock FROM order_line, stock
        WHERE ol_w_id = p_w_id AND ol_d_id = p_d_id AND ol_o_id < v_next_o_id
          AND ol_o_id >= v_next_o_id - 20 AND s_w_id = p_w_id AND s_i_id = ol_i_id
          AND s_quantity < p_threshold;
    RETURN v_low_stock;
END
$$;
